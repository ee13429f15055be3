"""Embedding cache in SQLite: vectors keyed by model id and text hash, so unchanged text is
never embedded twice (re-runs, resumed runs and incremental adds)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from engine.models.embed import Embedder
from engine.models.text_cache import TextCache, in_blocks

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
        vecs = self.values(
            embedder.model_id, texts, lambda t: encode_blocks(embedder, t), f"embed {label}", "text"
        )
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(vecs).astype(np.float32)

    def embed(self, embedder: Embedder, texts: list[str], label: str = "texts") -> list[str]:
        """Encode and store the texts not cached yet (as `encode` does) without holding their
        vectors; the texts' keys, for `stream`."""
        return self.fill(
            embedder.model_id, texts, lambda t: encode_blocks(embedder, t), f"embed {label}", "text"
        )

    def stream(self, model_id: str, keys: list[str], sink: Any) -> None:
        """Append the stored vectors of `keys`, in order, to `sink` a window at a time (an
        index build's vector files, which then never sit whole in memory)."""
        for part in self.stored(model_id, keys):
            sink.append(np.stack(part))
