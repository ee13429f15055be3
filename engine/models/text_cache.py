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


LOOKUP = 500
"""Keys per SQLite lookup (under SQLite's limit of bound parameters)."""
WINDOW = 8192
"""Values read back from the cache at a time by `TextCache.stored`."""


def text_key(text: str) -> str:
    """The cache key of a text: its sha1."""
    return hashlib.sha1(text.encode()).hexdigest()


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
        keys = self.fill(model_id, texts, compute, label, unit)
        return [v for part in self.stored(model_id, keys) for v in part]

    def fill(
        self, model_id: str, texts: list[str], compute: Blocks, label: str, unit: str
    ) -> list[str]:
        """Compute and store the value of every text not cached yet, holding none of them
        (each block is stored as it returns); the texts' keys, for `stored`."""
        keys = [text_key(t) for t in texts]
        todo: dict[str, str] = {}  # missing key -> its text, first seen first
        for lo in range(0, len(keys), LOOKUP):  # a batch at a time: no set of every key
            present = self._present(model_id, keys[lo : lo + LOOKUP])
            for k, t in zip(keys[lo : lo + LOOKUP], texts[lo : lo + LOOKUP], strict=True):
                if k in present:
                    self.hits += 1
                else:
                    todo.setdefault(k, t)
        self.misses += len(todo)
        bar = progress(label, total=len(todo), unit=unit) if todo else None
        todo_keys = list(todo)
        for positions, outs in compute(list(todo.values())):
            part = [todo_keys[i] for i in positions]
            self._store(model_id, zip(part, outs, strict=True))
            bar.update(len(part))
        if bar is not None:
            bar.close()
        return keys

    def stored(self, model_id: str, keys: list[str], window: int = WINDOW) -> Iterator[list[Any]]:
        """The stored values of `keys` in order, `window` at a time (what `fill` stored)."""
        for lo in range(0, len(keys), window):
            part = keys[lo : lo + window]
            got = dict(self._lookup(model_id, sorted(set(part))))
            missing = len(set(part) - got.keys())
            if missing:
                raise RuntimeError(
                    f"{self.path}: {missing} values of model {model_id} vanished from the cache "
                    "while it was read (another process deleting rows?); re-run"
                )
            yield [got[k] for k in part]

    def holds(self, model_id: str) -> bool:
        """Whether any value of this model is stored (false for a fresh build's cache)."""
        found = self._conn.execute(
            f"SELECT 1 FROM {self.table} WHERE model = ? LIMIT 1", [model_id]
        ).fetchone()
        return found is not None

    def _present(self, model_id: str, keys: list[str]) -> set[str]:
        return {k for (k,) in self._rows(model_id, keys, "key")}

    def _lookup(self, model_id: str, keys: list[str]) -> Iterator[tuple[str, Any]]:
        return ((k, self._load(v)) for k, v in self._rows(model_id, keys, f"key, {self.column}"))

    def _rows(self, model_id: str, keys: list[str], columns: str) -> Iterator[tuple]:
        """`columns` of the stored rows of `keys`, LOOKUP keys per query."""
        for i in range(0, len(keys), LOOKUP):
            part = keys[i : i + LOOKUP]
            yield from self._conn.execute(
                f"SELECT {columns} FROM {self.table} WHERE model = ? AND key IN "
                f"({','.join('?' * len(part))})",
                [model_id, *part],
            ).fetchall()

    def _store(self, model_id: str, pairs: Iterable[tuple[str, Any]]) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.executemany(
            f"INSERT OR IGNORE INTO {self.table} VALUES (?, ?, ?)",
            [(model_id, k, self._dump(v)) for k, v in pairs],
        )
        self._conn.execute("COMMIT")
