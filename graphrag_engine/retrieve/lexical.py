"""BM25 over chunk texts ("title\\ntext"): bm25s's tokenizer (English stopwords, no stemming) and
its precomputed term weights, queries scored by a compiled pass over their postings."""

from __future__ import annotations

import numpy as np

from graphrag_engine.retrieve.ranking import ChunkRanking


class BM25Retriever:
    """A bm25s index over the chunks, built once per run (a few seconds per 100k chunks)."""

    def __init__(self, texts: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        import bm25s

        self._bm25s = bm25s
        self.n = len(texts)
        self.model = bm25s.BM25(k1=k1, b=b, backend="numpy")
        self.model.index(
            bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False
        )
        weights = self.model.scores  # term -> (chunk rows, BM25 weight), one CSR row a term
        self._indptr = np.asarray(weights["indptr"], dtype=np.int64)
        self._docs = np.asarray(weights["indices"], dtype=np.int32)
        self._weights = np.asarray(weights["data"], dtype=np.float32)

    def search(self, queries: list[str], k: int) -> ChunkRanking:
        """Top-k chunk rows of every query in one batched call, equal scores by ascending row.

        A chunk's score is the sum of its weights for the query's words (a repeated word counts
        again), added in the query's order as bm25s adds them; only the chunks sharing a word
        with the query are read, so the cost follows their postings, not the corpus."""
        from graphrag_engine.kernels.postings_jit import postings_topk  # numba loads on first use

        tokens = self._bm25s.tokenize(
            queries, stopwords="en", return_ids=False, show_progress=False
        )
        vocab = self.model.vocab_dict
        # a query of stop words, punctuation or symbols only, or of words the corpus lacks, has
        # no postings: no hits
        terms = [[vocab[w] for w in words if w in vocab] for words in tokens]
        query_ptr = np.zeros(len(queries) + 1, dtype=np.int64)
        np.cumsum([len(t) for t in terms], out=query_ptr[1:])
        flat = np.fromiter((t for ts in terms for t in ts), dtype=np.int64, count=query_ptr[-1])
        ids, scores = postings_topk(
            self._indptr, self._docs, self._weights, query_ptr, flat, self.n, k
        )
        return ChunkRanking(ids, scores)
