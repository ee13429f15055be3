"""Persistent LLM response cache in SQLite (WAL): the ledger that makes interrupted runs resumable.

Keyed by model id, prompt and generation parameters. Several processes may read and write
the same file at once (WAL mode, a busy timeout, INSERT OR IGNORE). Entries keep their token
counts, so cost reports still add up answers that came from the cache. Failed calls are never
cached; API keys never reach it (only model ids, prompts, params and answers are stored).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from graphrag_engine.models.base import Completion
from graphrag_engine.models.sqlite_check import cache_file, check_cache_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    finish_reason TEXT NOT NULL,
    created REAL NOT NULL
)
"""
RESPONSE_COLUMNS = {"key", "model", "text", "prompt_tokens", "completion_tokens", "finish_reason"}


class ResponseCache:
    """SQLite-backed map from prompt key to completion, safe across threads and processes."""

    def __init__(self, path: str | Path, timeout_s: float = 60.0, readonly: bool = False) -> None:
        self.path = Path(path)
        self._timeout = timeout_s
        self._local = threading.local()
        self.readonly = readonly  # a dry run reads what is cached and writes nothing
        if readonly:
            if self.path.exists():  # read as it is: it must be what the engine wrote
                check_cache_db(self._conn(), self.path, "responses", RESPONSE_COLUMNS)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with cache_file(self.path), self._conn() as conn:
            conn.execute(_SCHEMA)
        check_cache_db(self._conn(), self.path, "responses", RESPONSE_COLUMNS)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None and self.readonly:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None)
            self._local.conn = conn
        elif conn is None:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
            self._local.conn = conn
        return conn

    def get_many(self, keys: list[str]) -> dict[str, Completion]:
        """Cached completions of the given keys (missing keys are absent)."""
        found: dict[str, Completion] = {}
        conn = self._conn()
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            rows = conn.execute(
                "SELECT key, text, prompt_tokens, completion_tokens, finish_reason FROM responses "
                f"WHERE key IN ({','.join('?' * len(part))})",
                part,
            ).fetchall()
            for key, text, pt, ct, fr in rows:
                found[key] = Completion(text, pt, ct, cached=True, latency_s=0.0, finish_reason=fr)
        return found

    def put_many(self, model: str, items: Iterable[tuple[str, Completion]]) -> int:
        """Store completions in one transaction; an existing key is kept (first answer wins)."""
        rows = [
            (key, model, c.text, c.prompt_tokens, c.completion_tokens, c.finish_reason, time.time())
            for key, c in items
        ]
        if not rows:
            return 0
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(rows)

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
