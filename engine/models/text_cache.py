"""Model outputs cached in SQLite by model id and text hash, so unchanged text never goes
through a model twice (re-runs, resumed runs, incremental adds, scheduled re-indexes). Several
processes may share a file (WAL mode, a busy timeout, INSERT OR IGNORE)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from engine.progress import progress

Blocks = Callable[[list[str]], Iterator[tuple[Sequence[int], Sequence[Any]]]]
"""What computes the missing values: texts -> (positions, values) block by block, any order."""


def in_blocks(
    own: Blocks | None, call: Callable[[list[str]], Sequence[Any]], texts: list[str], size: int
) -> Iterator[tuple[Sequence[int], Sequence[Any]]]:
    """(positions, values) of the texts block by block: `own(texts)` where the model offers
    blocks of its own (a Ray Data pipeline, any order), else `call` on `size` texts at a time."""
    if own is not None:
        yield from own(texts)
        return
    for lo in range(0, len(texts), size):
        yield range(lo, min(lo + size, len(texts))), call(texts[lo : lo + size])


class TextCache:
    """(model, sha1(text)) -> one value, in column `column` of table `table`; subclasses say
    how a value is stored (`_dump`) and read back (`_load`)."""

    table = "cache"
    column = "value"
    column_type = "BLOB"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            f"(model TEXT, key TEXT, {self.column} {self.column_type}, PRIMARY KEY (model, key))"
        )
        self.hits = 0
        self.misses = 0

    def _dump(self, value: Any) -> Any:
        return value

    def _load(self, stored: Any) -> Any:
        return stored

    def values(
        self, model_id: str, texts: list[str], compute: Blocks, label: str, unit: str
    ) -> list[Any]:
        """The value of every text, in order: cached ones read back, the rest computed by
        `compute` and each block stored as it returns (a killed run keeps it), counted on a
        `label` progress bar (shown when something is computed)."""
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        found = dict(self._lookup(model_id, sorted(set(keys))))
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        self.hits += len(texts) - sum(1 for k in keys if k in todo)
        self.misses += len(todo)
        bar = progress(label, total=len(todo), unit=unit) if todo else None
        todo_keys = list(todo)
        for positions, outs in compute(list(todo.values())):
            part = [todo_keys[i] for i in positions]
            self._store(model_id, zip(part, outs, strict=True))
            found.update(zip(part, outs, strict=True))
            bar.update(len(part))
        if bar is not None:
            bar.close()
        return [found[k] for k in keys]

    def holds(self, model_id: str) -> bool:
        """Whether any value of this model is stored (false for a fresh build's cache)."""
        found = self._conn.execute(
            f"SELECT 1 FROM {self.table} WHERE model = ? LIMIT 1", [model_id]
        ).fetchone()
        return found is not None

    def _lookup(self, model_id: str, keys: list[str]) -> Iterator[tuple[str, Any]]:
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            rows = self._conn.execute(
                f"SELECT key, {self.column} FROM {self.table} WHERE model = ? AND key IN "
                f"({','.join('?' * len(part))})",
                [model_id, *part],
            ).fetchall()
            yield from ((k, self._load(v)) for k, v in rows)

    def _store(self, model_id: str, pairs: Iterable[tuple[str, Any]]) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.executemany(
            f"INSERT OR IGNORE INTO {self.table} VALUES (?, ?, ?)",
            [(model_id, k, self._dump(v)) for k, v in pairs],
        )
        self._conn.execute("COMMIT")
