"""The compiled postings top-k equals a dense reference: every document's score summed in
float32 term by term in the query's order, the k best by score then lower document, -1 past
the documents a query touches."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.kernels.postings_jit import postings_topk


def _postings(rng: np.random.Generator, n_terms: int, n_docs: int):
    """A CSR of postings: each term's documents ascending, positive weights (some repeated, so
    that equal scores occur)."""
    indptr, docs, weights = [0], [], []
    for t in range(n_terms):
        n = int(rng.integers(0, n_docs + 1)) if t % 5 else 0  # every fifth term has none
        docs += sorted(rng.choice(n_docs, n, replace=False).tolist())
        weights += rng.choice([0.5, 1.25, 2.0, float(rng.uniform(0.1, 3))], n).tolist()
        indptr.append(len(docs))
    return (
        np.asarray(indptr, np.int64),
        np.asarray(docs, np.int32),
        np.asarray(weights, np.float32),
    )


def _reference(indptr, docs, weights, queries, n_docs, k):
    best = np.full((len(queries), k), -1, np.int64)
    best_score = np.zeros((len(queries), k), np.float32)
    for q, terms in enumerate(queries):
        score = np.zeros(n_docs, np.float32)
        touched = np.zeros(n_docs, bool)
        for t in terms:
            rows = slice(indptr[t], indptr[t + 1])
            score[docs[rows]] += weights[rows]
            touched[docs[rows]] = True
        ids = np.flatnonzero(touched)
        ids = ids[np.lexsort((ids, -score[ids]))][:k]
        best[q, : ids.size], best_score[q, : ids.size] = ids, score[ids]
    return best, best_score


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [0, 1, 5, 40])
def test_postings_topk_equals_the_dense_reference(seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    n_docs, n_terms = int(rng.integers(1, 60)), 25
    indptr, docs, weights = _postings(rng, n_terms, n_docs)
    queries = [rng.integers(0, n_terms, int(rng.integers(0, 8))).tolist() for _ in range(30)]
    queries.append([3, 3, 3])  # a repeated word counts again
    query_ptr = np.zeros(len(queries) + 1, np.int64)
    np.cumsum([len(q) for q in queries], out=query_ptr[1:])
    flat = np.asarray([t for q in queries for t in q], np.int64)
    got = postings_topk(indptr, docs, weights, query_ptr, flat, n_docs, k)
    want = _reference(indptr, docs, weights, queries, n_docs, k)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
