"""Model outputs cached in SQLite by model id and text hash, so unchanged text never goes
through a model twice (re-runs, resumed runs, incremental adds, scheduled re-indexes). Several
processes may share a file (WAL mode, a busy timeout, INSERT OR IGNORE)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from graphrag_engine.models.sqlite_check import cache_file, check_cache_db
from graphrag_engine.progress import BlockSizer, progress

Blocks = Callable[[list[str]], Iterator[tuple[Sequence[int], Sequence[Any]]]]
"""What computes the missing values: texts -> (positions, values) block by block, any order."""


def in_blocks(
    own: Blocks | None, call: Callable[[list[str]], Sequence[Any]], texts: list[str], size: int
) -> Iterator[tuple[Sequence[int], Sequence[Any]]]:
    """(positions, values) of the texts block by block: `own(texts)` where the model offers
    blocks of its own (a pool of workers, any order), else `call` on blocks sized to take about
    BLOCK_SECONDS each (at most `size` texts), so the caller's bar moves on a slow machine too."""
    if own is not None:
        yield from own(texts)
        return
    sizer, lo = BlockSizer(size), 0
    while lo < len(texts):
        hi = min(lo + sizer.size(), len(texts))
        values = call(texts[lo:hi])
        sizer.finished(hi - lo)
        yield range(lo, hi), values
        lo = hi


LOOKUP = 500
"""Keys per SQLite lookup (under SQLite's limit of bound parameters)."""
WINDOW = 8192
"""Texts a window at a time: what `windows` cuts a list into and `stored` reads back at once."""
PENDING_CHARS = 1 << 25
"""Characters of missing text `fill` gathers before one `compute` call (one model pipeline
per call on Ray): a cold build of a huge corpus holds at most about this much text."""

Windows = Iterable[Sequence[str]]
"""Texts in order, a window at a time (a build reads them back from its staged tables)."""


def windows(texts: Sequence[str], size: int = WINDOW) -> Iterator[Sequence[str]]:
    """A list of texts as `Windows`."""
    for lo in range(0, len(texts), size):
        yield texts[lo : lo + size]


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
        try:
            with cache_file(self.path):
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} "
                    f"(model TEXT, key TEXT, {self.column} {self.column_type}, "
                    "PRIMARY KEY (model, key))"
                )
        except BaseException:
            self._conn.close()
            raise
        check_cache_db(self._conn, self.path, self.table, {"model", "key", self.column})
        self.hits = 0
        self.misses = 0

    def _dump(self, value: Any) -> Any:
        return value

    def _load(self, stored: Any) -> Any:
        return stored

    def fill(
        self,
        model_id: str,
        texts: Windows,
        compute: Blocks,
        label: str,
        unit: str,
        total: int | None = None,
    ) -> int:
        """Compute and store the value of every text not cached yet, holding none of the
        values (each block is stored as it returns) and at most PENDING_CHARS of missing text;
        the number of texts seen. The progress bar counts all `total` texts, cached ones too."""
        bar = None
        seen = 0
        todo: dict[str, str] = {}  # missing key -> its text, first seen first
        pending = 0

        def flush() -> None:
            nonlocal bar, pending
            if bar is None:
                bar = progress(label, total=total, unit=unit, initial=seen - len(todo))
            todo_keys = list(todo)
            for positions, outs in compute(list(todo.values())):
                part = [todo_keys[i] for i in positions]
                self._store(model_id, zip(part, outs, strict=True))
                bar.update(len(part))
            todo.clear()
            pending = 0

        for window in texts:
            keys = [text_key(t) for t in window]
            added = 0
            for lo in range(0, len(keys), LOOKUP):  # a batch at a time: no set of every key
                present = self._present(model_id, keys[lo : lo + LOOKUP])
                for k, t in zip(keys[lo : lo + LOOKUP], window[lo : lo + LOOKUP], strict=True):
                    if k in present:
                        self.hits += 1
                    elif k not in todo:
                        todo[k] = t
                        pending += len(t)
                        added += 1
            self.misses += added
            seen += len(window)
            if bar is not None:  # what this window found cached is done already
                bar.update(len(window) - added)
            if pending >= PENDING_CHARS:
                flush()
        if todo:
            flush()
        if bar is not None:
            bar.close()
        return seen

    def stored(self, model_id: str, texts: Windows) -> Iterator[list[Any]]:
        """The stored values of the texts in order, a window at a time (what `fill` stored;
        the keys are computed again, so no build holds a key per text)."""
        for window in texts:
            part = [text_key(t) for t in window]
            unique = set(part)
            got = dict(self._lookup(model_id, sorted(unique)))
            if len(got) < len(unique):
                missing = len(unique) - len(got)
                raise RuntimeError(
                    f"{self.path}: {missing} values of model {model_id} were not in the cache "
                    "when read back (another process deleting rows?); re-run"
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
