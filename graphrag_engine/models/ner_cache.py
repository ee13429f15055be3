"""NER cache in SQLite: entity mentions keyed by model id and text hash, so a re-index tags
only the units whose text is new (the embedding cache does the same for vectors)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from graphrag_engine.models.text_cache import TextCache, Windows, in_blocks, windows

Mentions = list[tuple[str, str]]
BLOCK = 1024
"""Texts per `ner` call of a tagger without blocks of its own; each block is stored as it is done."""


def tag_blocks(tagger, texts: list[str]) -> Iterator[tuple[Sequence[int], list[Mentions]]]:
    """(positions, mentions) of the texts: the tagger's own `ner_blocks` (Ray), else BLOCK
    texts per `ner` call."""
    return in_blocks(getattr(tagger, "ner_blocks", None), tagger.ner, texts, BLOCK)


class NERCache(TextCache):
    """(model, sha1(text)) -> the text's (mention, label) pairs, as JSON."""

    table, column, column_type = "mentions", "found", "TEXT"

    def _dump(self, value: Mentions) -> str:
        return json.dumps(value)

    def _load(self, stored: str) -> Mentions:
        return [tuple(m) for m in json.loads(stored)]

    def extract(self, tagger, model_id: str, texts: list[str]) -> list[Mentions]:
        """Mentions of every text: cached ones read back, the rest tagged block by block by
        `tagger` (its `ner_blocks`, or `ner` calls), each block stored as it returns and counted
        on the `ner` progress bar."""
        self.tag(tagger, model_id, [texts], total=len(texts))
        return [m for part in self.mentions(model_id, windows(texts)) for m in part]

    def tag(self, tagger, model_id: str, texts: Windows, total: int | None = None) -> int:
        """Tag and store the texts not cached yet (as `extract` does) without holding their
        mentions; the number of texts seen. `mentions` reads them back."""
        return self.fill(model_id, texts, lambda t: tag_blocks(tagger, t), "ner", "unit", total)

    def mentions(self, model_id: str, texts: Windows) -> Iterator[list[Mentions]]:
        """The stored mentions of the texts, in order, a window at a time."""
        return self.stored(model_id, texts)
