"""BM25 over chunk texts ("title\\ntext") with bm25s: English stopwords, no stemming."""

from __future__ import annotations

import numpy as np

from graphrag_engine.retrieve.ranking import ChunkRanking

NUMBA_MIN_CHUNKS = 20_000
"""Corpora of this many chunks or more are scored by bm25s's numba backend; smaller ones by numpy,
whose per-question cost there is below what numba's compile (about 8 s a process on 2 cores)
would ever repay in a demo or a test."""


class BM25Retriever:
    """A bm25s index over the chunks, built once per run (a few seconds per 100k chunks)."""

    def __init__(self, texts: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        import bm25s

        self._bm25s = bm25s
        self.n = len(texts)
        # numba scores and selects the top-k per query compiled, 8-9x numpy's q/s (bench/scale.py),
        # but compiles for about 8 s in every process: worth it on large corpora only
        backend = "numba" if self.n >= NUMBA_MIN_CHUNKS else "numpy"
        self.model = bm25s.BM25(k1=k1, b=b, backend=backend)
        self.model.index(
            bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False
        )

    def search(self, queries: list[str], k: int) -> ChunkRanking:
        """Top-k chunk rows of every query in one batched call."""
        kk = min(k, self.n)
        tokens = self._bm25s.tokenize(
            queries, stopwords="en", return_ids=False, show_progress=False
        )
        out_ids = np.full((len(queries), k), -1, dtype=np.int64)
        out_scores = np.zeros((len(queries), k), dtype=np.float32)
        # a query of stop words, punctuation or symbols only has no BM25 token: no hits (bm25s
        # refuses an empty query, which would fail the whole batch)
        asked = [q for q, words in enumerate(tokens) if words]
        if not asked or kk == 0:
            return ChunkRanking(out_ids, out_scores)
        ids, scores = self.model.retrieve(
            [tokens[q] for q in asked], k=kk, show_progress=False, n_threads=0
        )
        order = np.lexsort((ids, -scores), axis=1)  # equal scores by ascending chunk row
        ids, scores = np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1)
        out_ids[asked, :kk], out_scores[asked, :kk] = ids, scores
        # a query sharing no word with the corpus scores 0 everywhere: no hits, not arbitrary ones
        out_ids[out_scores <= 0] = -1
        return ChunkRanking(out_ids, out_scores)
