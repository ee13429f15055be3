"""Files kept beside an index's tables (token counts of its context lines, ANN indexes): each
named by a fingerprint of what it was computed from, so a file never serves other inputs;
written atomically (a temporary name, then a rename), older files of the same kind dropped;
where the folder cannot be written, the caller keeps what it computed for this run only."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from graphrag_engine.store.staging import replace_with

log = logging.getLogger(__name__)

LINE_TOKENS = "line_tokens"
"""The folder beside the tables that holds each kind of context line's token counts."""
FINGERPRINT_HEX = 16


def writable(folder: str | Path) -> bool:
    """Whether this process may add files under `folder` (an index folder may be read-only)."""
    return os.access(folder, os.W_OK)


def save_beside(files: list[tuple[Path, Callable[[Path], None]]], what: str) -> bool:
    """Write each `(path, write)` in order, `write(tmp)` filling a temporary file that is then
    renamed onto `path`; then drop the other files of the same kind (same folder, same name up
    to the first '-'). False, with a warning, when the folder cannot be written."""
    first = files[0][0]
    try:
        first.parent.mkdir(parents=True, exist_ok=True)
        for path, write in files:
            replace_with(path, write)
    except OSError as exc:
        log.warning("%s: cannot save %s (%s); kept for this run only", first, what, exc)
        return False
    kind = first.name.split("-", 1)[0]
    keep = {path.name.split(".", 1)[0] for path, _ in files}
    for old in first.parent.glob(f"{kind}-*"):
        if old.name.split(".", 1)[0] not in keep:
            old.unlink(missing_ok=True)
    return True


class LineDigest:
    """The fingerprint of one kind of context lines under one tokenizer, fed lines in row
    order (a window at a time), and the file their counts are kept in."""

    def __init__(self, tokenizer_spec: str) -> None:
        self._digest = hashlib.sha256(tokenizer_spec.encode())

    def update(self, lines: Iterable[str]) -> LineDigest:
        """Add `lines`, the next rows."""
        for line in lines:
            self._digest.update(line.encode())
            self._digest.update(b"\0")
        return self

    def path(self, root: str | Path, kind: str) -> Path:
        """Where the counts of the lines fed so far are kept, beside the index at `root`."""
        return Path(root) / LINE_TOKENS / f"{kind}-{self._digest.hexdigest()[:FINGERPRINT_HEX]}.npy"


def line_tokens_path(
    root: str | Path, kind: str, tokenizer_spec: str, lines: Iterable[str]
) -> Path:
    """Where the token counts of the context lines of `kind` are kept: named by the tokenizer
    that counts them and every line, in row order."""
    return LineDigest(tokenizer_spec).update(lines).path(root, kind)


def read_line_tokens(path: Path, rows: int) -> np.ndarray | None:
    """The counts kept at `path` when they are whole (one per row), else None (a missing or
    damaged file is counted again and replaced)."""
    if not path.is_file():
        return None
    try:
        counts = np.load(path)
    except (OSError, ValueError):
        return None
    return counts if counts.shape == (rows,) else None


def save_line_tokens(path: Path, counts: np.ndarray) -> bool:
    """Keep `counts` at `path` (see `save_beside`)."""

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:  # a file object: np.save adds no .npy to its name
            np.save(fh, counts)

    return save_beside([(path, write)], "line token counts")
