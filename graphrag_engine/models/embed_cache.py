"""Embedding cache in SQLite: vectors keyed by model id and text hash, so unchanged text is
never embedded twice (re-runs, resumed runs and incremental adds)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from graphrag_engine.models.embed import Embedder
from graphrag_engine.models.text_cache import TextCache, Windows, in_blocks, windows

EMBED_CACHE = "embed_cache.sqlite"
"""The embedding cache's file name beside an index (the build's, and lazy query vectors')."""

SLICE = 4096
"""Texts per embedder call; each slice is stored before the next starts."""


def encode_blocks(embedder: Embedder, texts: list[str]) -> Iterator[tuple[Sequence[int], Any]]:
    """(positions, vectors) of the texts: the embedder's own `encode_blocks` (Ray), else SLICE
    texts per `encode` call."""
    return in_blocks(getattr(embedder, "encode_blocks", None), embedder.encode, texts, SLICE)


class EmbeddingCache(TextCache):
    """(model, sha1(text)) -> float32 vector."""

    table, column = "vectors", "vec"

    def _dump(self, value: np.ndarray) -> bytes:
        return np.asarray(value, dtype=np.float32).tobytes()

    def _load(self, stored: bytes) -> np.ndarray:
        return np.frombuffer(stored, dtype=np.float32)

    def encode(self, embedder: Embedder, texts: list[str], label: str = "texts") -> np.ndarray:
        """Vectors of all texts: cached ones read back, the rest encoded block by block, each
        block stored as it is done (a killed run keeps it) and counted on an `embed LABEL`
        progress bar."""
        self.embed(embedder, [texts], label, total=len(texts))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        parts = self.stored(embedder.model_id, windows(texts))
        return np.stack([v for part in parts for v in part]).astype(np.float32)

    def embed(
        self, embedder: Embedder, texts: Windows, label: str = "texts", total: int | None = None
    ) -> int:
        """Encode and store the texts not cached yet (as `encode` does) without holding their
        vectors; the number of texts seen. `stream` reads the vectors back."""
        return self.fill(
            embedder.model_id,
            texts,
            lambda t: encode_blocks(embedder, t),
            f"embed {label}",
            "text",
            total,
        )

    def stream(self, model_id: str, texts: Windows, sink: Any) -> None:
        """Append the stored vectors of the texts, in order, to `sink` a window at a time (an
        index build's vector files, which then never sit whole in memory)."""
        for part in self.stored(model_id, texts):
            if part:
                sink.append(np.stack(part))
