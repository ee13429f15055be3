"""Cache files are read back only when they are what the engine wrote: a SQLite database whose
cache table has the expected columns. Anything else (a damaged file, another program's
database) is one clear error naming the file, exit 2, instead of an internal error later."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from graphrag_engine.errors import BadInputError


def check_cache_db(conn: sqlite3.Connection, path: Path, table: str, columns: set[str]) -> None:
    """Refuse the cache at `path` (open as `conn`) unless `table` holds `columns`."""
    try:
        found = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    except sqlite3.OperationalError:
        raise  # locked, full or read-only: the command's own exit (75 / 74) says so
    except sqlite3.DatabaseError as exc:
        raise damaged(path, str(exc)) from None
    if not columns <= found:
        missing = ", ".join(sorted(columns - found))
        raise damaged(path, f"table {table!r} lacks {missing}")


def damaged(path: Path, why: str) -> BadInputError:
    """The error for a cache file the engine cannot read back."""
    return BadInputError(
        f"{path}: not a cache this engine wrote ({why}); move it aside and run the same "
        "command again (the cache is rebuilt; what it held is computed again)"
    )
