"""Cache files are read back only when they are what the engine wrote: a SQLite database whose
cache table has the expected columns. Anything else (a damaged file, another program's
database) is one clear error naming the file, exit 2, instead of an internal error later."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from graphrag_engine.errors import BadInputError


@contextmanager
def cache_file(path: Path) -> Iterator[None]:
    """Turn what SQLite raises on a file that is no database into `damaged(path)`; a locked,
    full or read-only file (OperationalError) keeps the command's own exit (75 / 74)."""
    try:
        yield
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as exc:
        raise damaged(path, str(exc)) from None


def check_cache_db(conn: sqlite3.Connection, path: Path, table: str, columns: set[str]) -> None:
    """Refuse the cache at `path` (open as `conn`) unless `table` holds `columns`."""
    with cache_file(path):
        found = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    if not columns <= found:
        missing = ", ".join(sorted(columns - found))
        raise damaged(path, f"table {table!r} lacks {missing}")


def damaged(path: Path, why: str) -> BadInputError:
    """The error for a cache file the engine cannot read back."""
    return BadInputError(
        f"{path}: not a cache this engine wrote ({why}); move it aside and run the same "
        "command again (the cache is rebuilt; what it held is computed again)"
    )
