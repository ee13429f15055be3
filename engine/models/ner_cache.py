"""NER cache in SQLite: entity mentions keyed by model id and text hash, so a re-index tags
only the units whose text is new (the embedding cache does the same for vectors)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

Mentions = list[tuple[str, str]]


class NERCache:
    """(model, sha1(text)) -> the text's (mention, label) pairs."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS mentions "
            "(model TEXT, key TEXT, found TEXT, PRIMARY KEY (model, key))"
        )
        self.hits = 0
        self.misses = 0

    def extract(
        self, tag: Callable[[list[str]], list[Mentions]], model_id: str, texts: list[str]
    ) -> list[Mentions]:
        """Mentions of every text: cached ones read back, the rest tagged by `tag` in one call
        and stored before returning (a killed run keeps them)."""
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        found: dict[str, Mentions] = {}
        distinct = sorted(set(keys))
        for i in range(0, len(distinct), 500):
            part = distinct[i : i + 500]
            rows = self._conn.execute(
                "SELECT key, found FROM mentions WHERE model = ? AND key IN "
                f"({','.join('?' * len(part))})",
                [model_id, *part],
            ).fetchall()
            found.update((k, [tuple(m) for m in json.loads(v)]) for k, v in rows)
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        self.hits += len(texts) - sum(1 for k in keys if k in todo)
        self.misses += len(todo)
        if todo:
            tagged = tag(list(todo.values()))
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR IGNORE INTO mentions VALUES (?, ?, ?)",
                [(model_id, k, json.dumps(m)) for k, m in zip(todo, tagged, strict=True)],
            )
            self._conn.execute("COMMIT")
            found.update((k, [tuple(x) for x in m]) for k, m in zip(todo, tagged, strict=True))
        return [list(found[k]) for k in keys]
