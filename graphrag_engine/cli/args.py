"""What the commands check of their arguments before any work: a folder they may write, a list of cut-offs."""

from __future__ import annotations

import os
from pathlib import Path

from graphrag_engine.errors import (
    BadInputError,
)


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


def cutoffs(text: str) -> list[int]:
    """--k: comma-separated positive integers."""
    try:
        ks = [int(k) for k in text.split(",")]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1:
        raise BadInputError(f"--k {text}: give comma-separated positive integers such as 1,2,5,10")
    return ks
