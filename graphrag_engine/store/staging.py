"""A staging folder beside an output folder: what a command writes goes there first and is
moved into place only when all of it was written, so a failed or killed command leaves no
half-written output (export renames the whole folder, eval moves its report files)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

OWNED = ".graphrag-engine-owned"
"""The file the engine puts in every folder it creates inside or beside a user's folder
(staging folders, generation folders), so that a sweep removes only what the engine wrote."""


def mark_owned(folder: Path) -> Path:
    """Create `folder` (and its parents) if needed and mark it as the engine's."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OWNED).touch()
    return folder


def owned(folder: Path) -> bool:
    """Whether `folder` carries the engine's mark (else it is the user's, and no sweep
    touches it)."""
    return (folder / OWNED).is_file()


@contextmanager
def staging_beside(out: Path) -> Iterator[Path]:
    """A fresh, empty `.<name>.staging-<pid>` folder beside `out`, removed on the way out
    whether the work succeeded (its content moved into place by then) or not."""
    staging = out.with_name(f".{out.name}.staging-{os.getpid()}")
    remove_stale_staging(out)
    if staging.exists() and not owned(staging):
        raise FileExistsError(f"{staging} exists and was not written by graphrag-engine")
    shutil.rmtree(staging, ignore_errors=True)
    mark_owned(staging)
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_stale_staging(out: Path) -> list[Path]:
    """Remove the engine's staging folders beside `out` whose process is gone (a killed export
    or judge could not remove its own); the folders removed."""
    removed = []
    for path in out.parent.glob(f".{out.name}.staging-*"):
        pid = path.name.rsplit("-", 1)[1]
        if not owned(path):
            continue
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (it may belong to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one rename, synced first: a reader sees old or new."""
    replace_with(path, lambda tmp: tmp.write_bytes(data))


def replace_with(path: Path, write: Callable[[Path], object]) -> None:
    """Replace `path` by what `write(tmp)` writes to a temporary file beside it (this
    process's own name, so writers never share one), synced, then renamed in one step: a
    reader sees the old file or the new one, never half of it; a failed write leaves no
    temporary file behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # no suffix: no glob of the
    # folder's files (`*.parquet`, `*.npy`) ever takes a file being written
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def listed_files(marker: Path) -> list[str] | None:
    """The file names a marker written by `write_listing` lists; None when there is none or
    it cannot be read (then nothing may be taken as written by the engine)."""
    try:
        listed = json.loads(marker.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return listed if isinstance(listed, list) else None


def write_listing(marker: Path, names: list[str], **fields: object) -> None:
    """Record, beside what a command wrote into a folder, the names it wrote there."""
    write_atomic(marker, json.dumps({**fields, "files": names}).encode())
