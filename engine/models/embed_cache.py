"""Embedding cache in SQLite: vectors keyed by model id and text hash, so unchanged text is
never embedded twice (re-runs, resumed runs and incremental adds)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.models.embed import Embedder
from engine.progress import progress

SLICE = 4096
"""Texts per embedder call; each slice is stored before the next starts."""


def encode_blocks(embedder: Embedder, texts: list[str]) -> Iterator[tuple[Sequence[int], Any]]:
    """(positions, vectors) of the texts, block by block as they are done: the embedder's own
    `encode_blocks` where it has one (a Ray Data pipeline, blocks in any order), else SLICE
    texts per `encode` call, in order."""
    own = getattr(embedder, "encode_blocks", None)
    if own is not None:
        yield from own(texts)
        return
    for lo in range(0, len(texts), SLICE):
        yield range(lo, min(lo + SLICE, len(texts))), embedder.encode(texts[lo : lo + SLICE])


class EmbeddingCache:
    """(model, sha1(text)) -> float32 vector."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, key TEXT, vec BLOB, PRIMARY KEY (model, key))"
        )
        self.hits = 0
        self.misses = 0

    def encode(self, embedder: Embedder, texts: list[str], label: str = "texts") -> np.ndarray:
        """Vectors of all texts: cached ones read back, the rest encoded SLICE texts at a time,
        each slice stored as it is done (a killed run keeps it) and counted on an `embed LABEL`
        progress bar."""
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        found: dict[str, np.ndarray] = {}
        distinct = sorted(set(keys))
        for i in range(0, len(distinct), 500):
            part = distinct[i : i + 500]
            rows = self._conn.execute(
                f"SELECT key, vec FROM vectors WHERE model = ? AND key IN ({','.join('?' * len(part))})",
                [embedder.model_id, *part],
            ).fetchall()
            found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        self.hits += len(texts) - sum(1 for k in keys if k in todo)
        self.misses += len(todo)
        todo_keys, todo_texts = list(todo), list(todo.values())
        bar = progress(f"embed {label}", total=len(todo), unit="text") if todo else None
        for positions, vecs in encode_blocks(embedder, todo_texts):
            part = [todo_keys[i] for i in positions]
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)",
                [
                    (embedder.model_id, k, v.astype(np.float32).tobytes())
                    for k, v in zip(part, vecs, strict=True)
                ],
            )
            self._conn.execute("COMMIT")
            found.update(zip(part, vecs, strict=True))
            bar.update(len(part))
        if bar is not None:
            bar.close()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32)
