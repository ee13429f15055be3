"""The shared batch operators of graphrag_engine.kernels.segments against plain per-owner references (sorted
Python lists, numpy argsort, scipy's CSR) on random data with ties."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from graphrag_engine.kernels.segments import (
    csr_from_pairs,
    csr_gather,
    csr_order,
    dense_topk,
    first_occurrences,
    group_by_owner,
    segment_rank,
    segment_topk,
)
from graphrag_engine.kernels.similarity import rowwise_dot


@pytest.fixture(params=[0, 1, 2])
def flat(request):
    rng = np.random.default_rng(request.param)
    n, owners = 500, 17
    owner = rng.integers(0, owners, n)
    scores = rng.integers(0, 20, n).astype(np.float32)  # many ties
    return owner, scores, owners


def test_segment_topk_matches_a_per_owner_sort(flat) -> None:
    owner, scores, owners = flat
    for k in (1, 3, 40):
        got = segment_topk(owner, scores, k).tolist()
        want = []
        for o in range(owners):
            idx = [i for i in range(owner.size) if owner[i] == o]
            want += sorted(idx, key=lambda i: -scores[i])[:k]  # stable: ties in input order
        assert got == want
    assert segment_topk(np.zeros(0, np.int64), np.zeros(0), 3).size == 0


def test_segment_rank(flat) -> None:
    owner, scores, owners = flat
    order, rank = segment_rank(owner, scores, owners)
    for o in range(owners):
        mine = order[owner[order] == o]
        assert rank[owner[order] == o].tolist() == list(range(mine.size))
        assert np.all(np.diff(scores[mine]) <= 0)


def test_dense_topk_matches_argsort() -> None:
    rng = np.random.default_rng(3)
    m = rng.random((6, 50))
    ids, vals = dense_topk(m, 7)
    assert ids.tolist() == np.argsort(-m, axis=1)[:, :7].tolist()
    np.testing.assert_array_equal(vals, np.take_along_axis(m, ids, axis=1))
    ids, vals = dense_topk(m[:, :3], 5)  # fewer columns than k: padded
    assert (ids[:, 3:] == -1).all() and (vals[:, 3:] == 0).all()


def test_dense_topk_breaks_ties_by_id_also_at_the_cut() -> None:
    """Equal scores come in ascending id order and the lowest ids win the last places, as a
    stable sort of the whole row would give, whatever argpartition leaves."""
    rng = np.random.default_rng(5)
    m = np.round(rng.random((200, 300)), 1)  # eleven distinct values: ties everywhere
    for k in (1, 7, 40):
        ids, vals = dense_topk(m, k)
        assert ids.tolist() == np.argsort(-m, axis=1, kind="stable")[:, :k].tolist()
        np.testing.assert_array_equal(vals, np.take_along_axis(m, ids, axis=1))
        # a row's result does not depend on the rows beside it
        alone = [dense_topk(m[r : r + 1], k)[0][0].tolist() for r in range(0, 200, 37)]
        assert alone == ids[::37].tolist()


def test_group_by_owner_and_csr(flat) -> None:
    owner, _, owners = flat
    groups = group_by_owner(owner, owners)
    assert [g.tolist() for g in groups] == [
        np.flatnonzero(owner == o).tolist() for o in range(owners)
    ]
    rng = np.random.default_rng(4)
    rows, cols = rng.integers(0, 30, 200), rng.integers(0, 40, 200)
    indptr, idx = csr_from_pairs(rows, cols, 30)
    ref = sp.csr_matrix((np.ones(200), (rows, cols)), shape=(30, 40))
    ref.sort_indices()
    for r in range(30):  # duplicates kept, columns ascending
        want = sorted(cols[rows == r].tolist())
        assert idx[indptr[r] : indptr[r + 1]].tolist() == want
        assert set(want) == set(ref.indices[ref.indptr[r] : ref.indptr[r + 1]].tolist())


def test_rowwise_dot() -> None:
    rng = np.random.default_rng(5)
    q, v = rng.random((4, 8)).astype(np.float32), rng.random((10, 8)).astype(np.float32)
    owner, rows = rng.integers(0, 4, 30), rng.integers(0, 10, 30)
    np.testing.assert_allclose(rowwise_dot(q, owner, v, rows), (q @ v.T)[owner, rows], rtol=1e-5)


def test_csr_gather_lists_every_entry_of_the_chosen_rows_in_order() -> None:
    indptr = np.array([0, 2, 2, 5, 6])  # rows of 2, 0, 3 and 1 entries
    owner, slots = csr_gather(indptr, np.array([2, 1, 0, 2]))
    assert owner.tolist() == [0, 0, 0, 2, 2, 3, 3, 3]
    assert slots.tolist() == [2, 3, 4, 0, 1, 2, 3, 4]
    empty = csr_gather(indptr, np.zeros(0, np.int64))
    assert empty[0].size == empty[1].size == 0


@pytest.mark.parametrize("seed", range(4))
def test_csr_order_is_the_two_key_lexsort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 50))
    rows = rng.integers(0, n, 400)
    for cols in (
        rng.integers(0, 30, 400),  # many equal pairs: their given order is kept
        rng.integers(0, 30, 400).astype(np.uint32),
        rng.integers(-5, 30, 400),  # negative columns: the lexsort itself
        rng.random(400),  # float columns, likewise
        np.arange(400)[::-1].copy(),
    ):
        indptr, order = csr_order(rows, cols, n)
        assert order.tolist() == np.lexsort((cols, rows)).tolist()
        assert indptr.tolist() == [0, *np.cumsum(np.bincount(rows, minlength=n)).tolist()]
    indptr, order = csr_order(np.zeros(0, np.int64), np.zeros(0, np.int64), 3)
    assert order.size == 0 and indptr.tolist() == [0, 0, 0, 0]


def test_first_occurrences_keep_the_order_values_are_first_seen_in() -> None:
    rng = np.random.default_rng(5)
    for size in (0, 1, 7, 500):
        values = rng.integers(0, 40, size=size)
        expected = list(dict.fromkeys(values.tolist()))
        assert first_occurrences(values).tolist() == expected
