"""What the commands check of their arguments before any work: a folder they may write, a
list of cut-offs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from graphrag_engine.errors import BadInputError


def writable_folder(path: str, flag: str = "--out") -> Path:
    """`path` as an output folder that exists or can be made, and can be written to."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise BadInputError(f"{flag} {path}: is a file; give a folder path")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInputError(f"{flag} {path}: cannot create the folder ({exc.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise BadInputError(f"{flag} {path}: cannot write there (permission denied)")
    return out


@contextmanager
def output_folder(path: str, flag: str = "--out") -> Iterator[Path]:
    """`writable_folder(path)` for the length of a command that writes there; a folder the
    command made is removed again when it fails before keeping anything in it (an index's
    lock file aside), so a refused input leaves no empty folder behind."""
    new = not Path(path).exists()
    out = writable_folder(path, flag)
    try:
        yield out
    except BaseException:
        if new and all(p.name == ".lock" for p in out.iterdir()):
            shutil.rmtree(out, ignore_errors=True)
        raise


def cutoffs(text: str) -> list[int]:
    """--k: comma-separated positive integers."""
    try:
        ks = [int(k) for k in text.split(",")]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1:
        raise BadInputError(f"--k {text}: give comma-separated positive integers such as 1,2,5,10")
    return ks
