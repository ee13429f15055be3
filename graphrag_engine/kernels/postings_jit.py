"""Compiled top-k over summed postings (numba): lexical scoring whose cost follows the postings a
query touches, not the number of documents. Kept apart so that importing the kernels does not
import numba."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def postings_topk(
    indptr: np.ndarray,
    docs: np.ndarray,
    weights: np.ndarray,
    query_ptr: np.ndarray,
    terms: np.ndarray,
    n_docs: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """For query q (terms[query_ptr[q]:query_ptr[q + 1]], repeats counted): each document's
    score is the sum of the weights its postings carry (term t's postings are
    docs/weights[indptr[t]:indptr[t + 1]]), added term by term in the query's order; the k best
    documents, best first, the lower document first on equal scores, -1 past the documents
    touched. Weights must be positive (a zero in the scratch row marks an untouched document).
    Only touched documents are read: one scratch row, reset as it is read back, each document
    entering the sorted top k by insertion (a few dozen enter in a typical query)."""
    n = query_ptr.size - 1
    best = np.full((n, k), -1, dtype=np.int64)
    best_score = np.zeros((n, k), dtype=np.float32)
    scratch = np.zeros(n_docs, dtype=np.float32)
    touched = np.empty(n_docs + 1, dtype=np.int32)  # a slot past the last for the write
    if k == 0:
        return best, best_score
    for q in range(n):
        m = 0
        for x in range(query_ptr[q], query_ptr[q + 1]):
            t = terms[x]
            for j in range(indptr[t], indptr[t + 1]):
                d = docs[j]
                score = scratch[d]
                # weights are positive, so a zero marks d's first posting; written without a
                # branch (d always goes to the next slot, which counts only then): the branch
                # mispredicts on a common word's long postings, and this loop is the kernel
                touched[m] = d
                m += score == 0.0
                scratch[d] = score + weights[j]
        top, top_score, filled = best[q], best_score[q], 0
        for i in range(m):  # read back, reset, and insert into the sorted top k if it enters
            d = touched[i]
            score = scratch[d]
            scratch[d] = 0.0
            if filled == k:
                if score < top_score[k - 1] or (score == top_score[k - 1] and d > top[k - 1]):
                    continue
                at = k - 1
            else:
                at = filled
                filled += 1
            while at > 0 and (
                top_score[at - 1] < score or (top_score[at - 1] == score and top[at - 1] > d)
            ):
                top[at], top_score[at] = top[at - 1], top_score[at - 1]
                at -= 1
            top[at], top_score[at] = d, score
    return best, best_score
