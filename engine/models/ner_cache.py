"""NER cache in SQLite: entity mentions keyed by model id and text hash, so a re-index tags
only the units whose text is new (the embedding cache does the same for vectors)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

Mentions = list[tuple[str, str]]
BLOCK = 1024
"""Texts per `ner` call of a tagger without blocks of its own; each block is stored as it is done."""


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
        self, tagger, model_id: str, texts: list[str], on_done: Callable[[int], None] | None = None
    ) -> list[Mentions]:
        """Mentions of every text: cached ones read back, the rest tagged block by block
        (`tag_blocks`) and each block stored as it returns (a killed run keeps it); `on_done`
        hears how many texts each step settled."""
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
        if on_done is not None:
            on_done(len(texts) - sum(1 for k in keys if k in todo))
        todo_keys = list(todo)
        for positions, tagged in tag_blocks(tagger, list(todo.values())):
            part = [todo_keys[i] for i in positions]
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR IGNORE INTO mentions VALUES (?, ?, ?)",
                [(model_id, k, json.dumps(m)) for k, m in zip(part, tagged, strict=True)],
            )
            self._conn.execute("COMMIT")
            found.update((k, [tuple(x) for x in m]) for k, m in zip(part, tagged, strict=True))
            if on_done is not None:
                on_done(len(part))
        return [list(found[k]) for k in keys]


def tag_blocks(tagger, texts: list[str]) -> Iterator[tuple[Sequence[int], list[Mentions]]]:
    """(positions, mentions) of the texts, block by block as they are done: the tagger's own
    `ner_blocks` where it has one (a Ray Data pipeline, blocks in any order), else BLOCK texts
    per `ner` call, in order."""
    own = getattr(tagger, "ner_blocks", None)
    if own is not None:
        yield from own(texts)
        return
    for lo in range(0, len(texts), BLOCK):
        yield range(lo, min(lo + BLOCK, len(texts))), tagger.ner(texts[lo : lo + BLOCK])
