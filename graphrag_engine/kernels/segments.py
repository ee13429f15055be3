"""Batch operators over flat arrays whose entries belong to owners (questions, paths, nodes):
segmented top-k, row-wise top-k of a dense matrix, grouping by owner and CSR from pairs.

Every retrieval stage keeps a whole batch in flat arrays with an `owner` array beside them, so
these four are the building blocks of beam steps, rankings and adjacency lists alike.
"""

from __future__ import annotations

import numpy as np


def segment_topk(owner: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k best scores of every owner in flat arrays (owner-sorted output, best
    first within an owner; ties keep their input order)."""
    if owner.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-scores, owner))
    o = owner[order]
    starts = np.searchsorted(o, o, side="left")
    rank = np.arange(o.size) - starts
    return order[rank < k]


def segment_rank(owner: np.ndarray, scores: np.ndarray, n_owners: int) -> tuple[np.ndarray, ...]:
    """(order, rank): entries sorted by owner then score (best first), and each sorted entry's
    rank within its owner."""
    order = np.lexsort((-scores, owner))
    o = owner[order]
    starts = np.searchsorted(o, np.arange(n_owners))
    return order, np.arange(o.size) - starts[o]


def dense_topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(B, k) column ids and values of the k largest entries of every row of a (B, n) matrix,
    best first, equal values by ascending id (also at the cut: the lowest ids get in); -1 / 0
    pad rows when n < k. Ties are common (sibling nodes share a PPR score), and breaking them by
    id makes a row's result independent of what argpartition happened to leave."""
    b, n = scores.shape
    kk = min(k, n)
    ids = np.full((b, k), -1, dtype=np.int64)
    vals = np.zeros((b, k), dtype=scores.dtype)
    if kk == 0:
        return ids, vals
    part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
    top = np.take_along_axis(scores, part, axis=1)
    cut = top.min(axis=1, keepdims=True)
    for r in np.flatnonzero((scores == cut).sum(1) > (top == cut).sum(1)):
        above = np.flatnonzero(scores[r] > cut[r, 0])
        tied = np.flatnonzero(scores[r] == cut[r, 0])[: kk - above.size]
        part[r] = np.concatenate([above, tied])
        top[r] = scores[r, part[r]]
    order = np.lexsort((part, -top), axis=1)
    ids[:, :kk] = np.take_along_axis(part, order, axis=1)
    vals[:, :kk] = np.take_along_axis(top, order, axis=1)
    return ids, vals


def first_occurrences(values: np.ndarray) -> np.ndarray:
    """The distinct values, each once, in the order they first occur."""
    _, first = np.unique(values, return_index=True)
    return values[np.sort(first)]


def group_by_owner(owner: np.ndarray, n_owners: int) -> list[np.ndarray]:
    """Entry ids grouped by owner 0..n_owners-1, ascending within a group (one stable sort, not
    one scan per owner)."""
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(n_owners + 1))
    return [order[bounds[q] : bounds[q + 1]] for q in range(n_owners)]


def csr_order(rows: np.ndarray, cols: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The one CSR builder: (indptr, order) such that `cols[order]` lists each row's columns
    ascending, row after row (equal pairs in their given order); apply `order` to any array
    parallel to the pairs (weights, ids). Integer pairs sort as one int64 key (row * span +
    col): one stable sort instead of a two-key lexsort, with the same order."""
    rows, cols = np.asarray(rows), np.asarray(cols)
    integers = cols.dtype.kind in "iu" and rows.dtype.kind in "iu"
    span = int(cols.max()) + 1 if integers and cols.size else 1
    if (
        integers
        and (not cols.size or int(cols.min()) >= 0)
        and (not rows.size or int(rows.min()) >= 0)
        and max(n_rows, int(rows.max()) + 1 if rows.size else 0) * span < 2**62
    ):
        order = np.argsort(rows.astype(np.int64) * span + cols.astype(np.int64), kind="stable")
    else:
        order = np.lexsort((cols, rows))
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    return indptr, order


def csr_from_pairs(rows: np.ndarray, cols: np.ndarray, n_rows: int) -> tuple[np.ndarray, ...]:
    """(indptr, cols) of the (row, col) pairs, columns ascending within a row."""
    indptr, order = csr_order(rows, cols, n_rows)
    return indptr, cols[order].astype(np.int64)


def csr_gather(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, slots) of every entry of the CSR rows `rows`, row after row: `owner[i]` is the
    position in `rows` of the row the entry belongs to, `slots[i]` the entry's index into the
    CSR's value arrays (one vectorised gather, not one slice per row)."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = indptr[rows]
    counts = indptr[rows + 1] - starts
    owner = np.repeat(np.arange(rows.size, dtype=np.int64), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)  # each row's first flat position
    return owner, np.repeat(starts, counts) + np.arange(owner.size) - first
