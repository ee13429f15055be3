"""Embedders: `encode(texts) -> float32 (n, d)`, L2-normalized, batched with progress.

Backends: sentence-transformers (default: the packaged all-MiniLM-L6-v2), FlagEmbedding BGE-M3
from a local path, and an OpenAI-compatible embeddings endpoint (graphrag_engine.models.openai_llm).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from graphrag_engine.errors import ConfigError
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.models.embed_pipeline import MAX_BATCH, EmbedPipeline
from graphrag_engine.models.packaged import (  # noqa: F401  (packaged_minilm_path: re-exported)
    MINILM,
    MPNET,
    packaged_minilm_path,
    packaged_model_path,
)
from graphrag_engine.models.text_cache import in_blocks
from graphrag_engine.progress import silence_library_bars

DEFAULT_EMBEDDER = MINILM
BATCH_TOKENS = 2048
"""Padded tokens per CPU forward pass when the config leaves batch_size unset (bench/
embed_batch.py): long texts go a few at a time, short ones many, so a layer's activations stay
in cache and little is padded."""
GPU_BATCH_TOKENS = 65536
"""Padded tokens per forward pass on a GPU when batch_size is unset: enough work per pass that
the chip is not left waiting on kernel launches (bench/model_rates.py)."""
GPU_MAX_BATCH = 1024
"""Texts per GPU forward pass at most under GPU_BATCH_TOKENS."""
BLOCK = 4096
"""Texts per pipeline block at most (tokenized while the one before runs on the model)."""


class Embedder(Protocol):
    """Maps texts to unit vectors (one may also have `encode_queries`: see query_encoder)."""

    model_id: str

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalized."""


def query_encoder(embedder: Embedder) -> Callable[[list[str]], np.ndarray]:
    """How `embedder` embeds query-side texts: its `encode_queries` where it has one (the int8
    embedder keeps queries at fp32 against its int8 index vectors), else `encode`."""
    return getattr(embedder, "encode_queries", embedder.encode)


class SentenceTransformerEmbedder:
    """sentence-transformers model from a local folder (default: packaged all-MiniLM-L6-v2)."""

    def __init__(
        self, model: str | None = None, device: str = "cpu", batch_size: int | None = None
    ) -> None:
        from sentence_transformers import SentenceTransformer

        name = model or DEFAULT_EMBEDDER
        path = packaged_model_path(name) or name
        if not Path(path).exists():
            raise ConfigError(
                f"embedder.model: {path} does not exist (give a local folder; nothing is downloaded)"
            )
        silence_library_bars()
        self.model = SentenceTransformer(path, device=device, local_files_only=True)
        if device.startswith("cuda"):
            import torch

            self.model.to(torch.float16)  # vectors at cosine .9999+ to float32's (tests)
        self.batch_size = batch_size
        self.device = device
        packaged = name in (MINILM, MPNET)
        self.model_id = f"sentence-transformers:{name if packaged else Path(path).name}"
        self.pipeline = EmbedPipeline(self.model, device, *self._budget())

    def _budget(self) -> tuple[int | None, int]:
        """(padded tokens, texts) per forward pass: a set batch_size is texts alone."""
        if self.batch_size is not None:
            return None, self.batch_size
        if self.device.startswith("cuda"):
            return GPU_BATCH_TOKENS, GPU_MAX_BATCH
        return BATCH_TOKENS, MAX_BATCH

    @property
    def dim(self) -> int:
        """Embedding width."""
        getter = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        return int(getter())

    @property
    def tokenizer(self):
        """The model's own tokenizer (used for token counts)."""
        return self.model.tokenizer

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, d) float32, L2-normalized, sorted by length into padded batches (the caller's
        progress bar counts them: sentence-transformers' own bar stays off)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.pipeline.encode(texts)

    def encode_blocks(self, texts: list[str]) -> Iterator[tuple[Sequence[int], np.ndarray]]:
        """(positions, vectors) block by block, each tokenized while the one before runs."""
        return self.pipeline.blocks(texts, BLOCK)


class BGEM3Embedder:
    """FlagEmbedding BGE-M3 dense vectors from a local folder (GPU recommended)."""

    def __init__(self, model: str, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            from FlagEmbedding import BGEM3FlagModel
        except ImportError:
            raise ConfigError(
                "embedder.backend 'bge-m3' needs FlagEmbedding: pip install 'graphrag-engine[gpu]'"
            ) from None
        if not Path(model).exists():
            raise ConfigError(f"embedder.model: {model} does not exist (a local BGE-M3 folder)")
        self.model = BGEM3FlagModel(model, use_fp16=device != "cpu", devices=device)
        self.batch_size = batch_size
        self.model_id = f"bge-m3:{Path(model).name}"

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, 1024) float32, L2-normalized dense vectors."""
        out = self.model.encode(texts, batch_size=self.batch_size, return_dense=True)["dense_vecs"]
        return l2_normalize(np.asarray(out))


class PrefixedEmbedder:
    """An embedder whose model expects a query prefix and a passage prefix (e5's "query: " and
    "passage: ", bge's query instruction): passages go through `encode` with the passage
    prefix, query-side texts through `encode_queries` with the query prefix. The prefixes are
    part of `model_id`, so cached vectors of other prefixes are never read."""

    def __init__(self, inner: Embedder, query_prefix: str, passage_prefix: str) -> None:
        self.inner, self.query_prefix, self.passage_prefix = inner, query_prefix, passage_prefix
        tag = hashlib.sha256(f"{query_prefix}\0{passage_prefix}".encode()).hexdigest()[:8]
        self.model_id = f"{inner.model_id}+prefixes:{tag}"

    def __getattr__(self, name: str):
        return getattr(self.inner, name)  # dim, tokenizer, device, ...

    def encode(self, texts: list[str]) -> np.ndarray:
        """Passage vectors: each text after the passage prefix."""
        return self.inner.encode([self.passage_prefix + t for t in texts])

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors: each text after the query prefix."""
        return query_encoder(self.inner)([self.query_prefix + t for t in texts])

    def encode_blocks(self, texts: list[str]) -> Iterator[tuple[Sequence[int], np.ndarray]]:
        """Passage vectors block by block: the inner embedder's own blocks, else BLOCK texts a
        call (`in_blocks`, as the embedding cache feeds any embedder); defined here so that the
        delegation of other attributes never hands out the inner blocks without the prefix."""
        own = getattr(self.inner, "encode_blocks", None)
        prefixed = [self.passage_prefix + t for t in texts]
        return in_blocks(own, self.inner.encode, prefixed, BLOCK)
