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
