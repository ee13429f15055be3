"""Model scorers behind one batch call (the `Scorer` protocol): `score_batch(pairs)`.

The bi-encoder cosine reranker (default, offline) embeds all queries and all distinct texts
in one call each; the cross-encoder scores every (query, text) pair of the batch in one
predict call (sentence-transformers CrossEncoder, or a FlagEmbedding reranker, from a local path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from graphrag_engine.errors import ConfigError
from graphrag_engine.models.embed import Embedder


class Scorer(Protocol):
    """Scores candidate texts against their queries in one call for a whole batch; higher is
    more relevant. Every scorer (model rerankers here, random / BM25 / LLM in
    graphrag_engine.retrieve.scoring) carries its usage and its parse failures."""

    model_id: str
    failures: int
    """Model answers that never parsed (an LLM scorer); those candidates scored 0."""

    def score_batch(self, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """One score array per (query, candidate texts) pair."""

    def take_tokens(self) -> list[int]:
        """LLM tokens per pair position since the last take (empty for a scorer without an LLM)."""


class ScorerBase:
    """What every scorer shares: `score` as a batch of one, no failures, no LLM tokens."""

    failures: int = 0

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        """Scores of `texts` for one query."""
        return self.score_batch([(query, texts)])[0]  # type: ignore[attr-defined]

    def take_tokens(self) -> list[int]:
        """No LLM, no tokens."""
        return []


class BiEncoderReranker(ScorerBase):
    """Cosine of embeddings: two embedding calls for the whole batch."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model_id = f"bi-encoder:{embedder.model_id}"

    def score_batch(self, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """Cosine scores per pair; each distinct text is embedded once."""
        if not pairs:
            return []
        queries = self.embedder.encode([q for q, _ in pairs])
        distinct = sorted({t for _, texts in pairs for t in texts})
        row = {t: i for i, t in enumerate(distinct)}
        vecs = self.embedder.encode(distinct)
        return [
            vecs[[row[t] for t in texts]] @ queries[i] if texts else np.zeros(0, np.float32)
            for i, (_, texts) in enumerate(pairs)
        ]


class CrossEncoderReranker(ScorerBase):
    """A cross-encoder from a local folder; all pairs of the batch in one predict call."""

    def __init__(
        self,
        model: str,
        backend: str = "sentence-transformers",
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        if not Path(model).exists():
            raise ConfigError(
                f"reranker.model: {model} does not exist (give a local cross-encoder folder)"
            )
        self.backend = backend
        self.batch_size = batch_size
        if backend == "sentence-transformers":
            from sentence_transformers import CrossEncoder

            self.model = CrossEncoder(model, device=device, num_labels=1, local_files_only=True)
        elif backend == "flag":
            try:
                from FlagEmbedding import FlagReranker
            except ImportError:
                raise ConfigError(
                    "reranker.backend 'flag' needs FlagEmbedding: pip install 'graphrag-engine[gpu]'"
                ) from None
            self.model = FlagReranker(model, use_fp16=device != "cpu", devices=device)
        else:
            raise ConfigError(
                f"reranker backend must be 'sentence-transformers' or 'flag', got {backend!r}"
            )
        self.model_id = f"cross-encoder:{Path(model).name}"

    def score_batch(self, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """Relevance logits per pair."""
        flat = [(q, t) for q, texts in pairs for t in texts]
        if not flat:
            return [np.zeros(0, np.float32) for _ in pairs]
        if self.backend == "flag":
            scores = np.asarray(
                self.model.compute_score(flat, batch_size=self.batch_size), dtype=np.float32
            ).ravel()
        else:
            scores = np.asarray(
                self.model.predict(flat, batch_size=self.batch_size, show_progress_bar=False),
                dtype=np.float32,
            ).ravel()
        out, start = [], 0
        for _, texts in pairs:
            out.append(scores[start : start + len(texts)])
            start += len(texts)
        return out
