"""Compiled dot products of flat (query, row) pairs (numba): `similarity.rowwise_dot` for large
candidate sets, kept apart so that importing `graphrag_engine.kernels.similarity` does not
import numba."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True, parallel=True)
def pair_dots(
    queries: np.ndarray, owner: np.ndarray, vectors: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """queries[owner[i]] . vectors[rows[i]] for every i, summed in float64, without gathering
    either side into a temporary matrix (the gathers cost more than the products)."""
    out = np.empty(owner.size, dtype=np.float32)
    dim = queries.shape[1]
    for i in prange(owner.size):
        q, r = owner[i], rows[i]
        acc = 0.0
        for d in range(dim):
            acc += np.float64(queries[q, d]) * np.float64(vectors[r, d])
        out[i] = acc
    return out


@njit(cache=True, nogil=True, fastmath=True)
def csr_topk_dots(
    queries: np.ndarray,
    rows: np.ndarray,
    indptr: np.ndarray,
    members: np.ndarray,
    vectors: np.ndarray,
    skip_ptr: np.ndarray,
    skip: np.ndarray,
    k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For item i: the k members of CSR row rows[i] (not in skip[skip_ptr[i]:skip_ptr[i + 1]])
    whose vectors have the largest dot product with queries[i], best first, an earlier member
    first on ties; each row scanned once, with no gathered matrix and no sort. Sums run in
    float32 so that they vectorise; equal vectors still get equal scores, so ties among copies
    stay ties. One thread: the rows are short, and a parallel loop does not pay for itself."""
    n, dim = rows.size, queries.shape[1]
    best = np.full((n, k), -1, dtype=np.int64)
    score = np.zeros((n, k), dtype=np.float32)
    filled = np.zeros(n, dtype=np.int64)
    for i in range(n):
        r, got, query = rows[i], 0, queries[i]
        for s in range(indptr[r], indptr[r + 1]):
            m = members[s]
            if s > indptr[r] and members[s - 1] == m:
                continue  # a repeated pair
            skipped = False
            for x in range(skip_ptr[i], skip_ptr[i + 1]):
                if skip[x] == m:
                    skipped = True
                    break
            if skipped:
                continue
            vector, value = vectors[m], np.float32(0.0)
            for d in range(dim):
                value += query[d] * np.float32(vector[d])
            if got < k:
                pos = got
                got += 1
            elif value > score[i, k - 1]:
                pos = k - 1
            else:
                continue
            while pos > 0 and score[i, pos - 1] < value:  # equal scores stay ahead
                score[i, pos] = score[i, pos - 1]
                best[i, pos] = best[i, pos - 1]
                pos -= 1
            score[i, pos] = value
            best[i, pos] = m
        filled[i] = got
    return best, score, filled
