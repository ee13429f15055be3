"""Cosine top-k, faiss index, CSR views and knapsack against references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.knapsack import knapsack
from graphrag_engine.kernels.similarity import (
    TorchFlatIndex,
    cosine_matrix,
    cosine_topk,
    l2_normalize,
)


def brute_topk(q, c, k):
    s = l2_normalize(q) @ l2_normalize(c).T
    ids = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, ids, axis=1), ids


@pytest.mark.parametrize(
    ("nq", "nc", "k"), [(1, 10, 3), (37, 1000, 10), (300, 5000, 25), (5, 7, 10)]
)
def test_cosine_topk_matches_brute_force_with_small_blocks(nq: int, nc: int, k: int) -> None:
    rng = np.random.default_rng(nq)
    q, c = rng.normal(size=(nq, 32)), rng.normal(size=(nc, 32))
    scores, ids = cosine_topk(q, c, k, block_queries=16, block_candidates=97)
    ref_s, ref_i = brute_topk(q, c, k)
    kk = min(k, nc)
    np.testing.assert_allclose(scores[:, :kk], ref_s, atol=1e-5)
    assert (ids[:, :kk] == ref_i).mean() > 0.999  # ties aside
    if k > nc:
        assert np.all(ids[:, nc:] == -1) and np.all(np.isinf(scores[:, nc:]))


def test_torch_flat_index_agrees_with_faiss_flat_ip() -> None:
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng(1)
    data, queries = rng.normal(size=(3000, 64)), rng.normal(size=(50, 64))
    index = TorchFlatIndex(64)
    index.add(data[:1000])
    index.add(data[1000:])
    assert index.ntotal == 3000
    ts, ti = index.search(queries, 10)
    reference = faiss.IndexFlatIP(64)  # the reference: faiss's exact inner product
    reference.add(np.ascontiguousarray(l2_normalize(data)))
    fs, fi = reference.search(np.ascontiguousarray(l2_normalize(queries)), 10)
    np.testing.assert_allclose(ts, fs, atol=1e-5)
    assert (ti == fi).mean() > 0.99
    ref_s, _ = brute_topk(queries, data, 10)
    np.testing.assert_allclose(ts, ref_s, atol=1e-5)


def test_cosine_matrix() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(5, 8)), rng.normal(size=(7, 8))
    ref = np.array([[x @ y / np.linalg.norm(x) / np.linalg.norm(y) for y in b] for x in a])
    np.testing.assert_allclose(cosine_matrix(a, b), ref, atol=1e-6)


def test_memmapped_candidates(tmp_path) -> None:
    rng = np.random.default_rng(3)
    c = rng.normal(size=(2000, 16)).astype(np.float32)
    np.save(tmp_path / "c.npy", c)
    mm = np.load(tmp_path / "c.npy", mmap_mode="r")
    q = rng.normal(size=(10, 16))
    assert np.array_equal(cosine_topk(q, mm, 5, block_candidates=300)[1], brute_topk(q, c, 5)[1])


def test_csr_views_are_zero_copy_and_equal() -> None:
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 50, 200), rng.integers(0, 50, 200)
    w = rng.random(200)
    g = CSRGraph.from_edges(src, dst, w, n_nodes=50, node_type=np.arange(50) % 3)
    ref = sp.coo_matrix((w, (src, dst)), shape=(50, 50)).toarray()
    m = g.to_scipy()
    assert np.shares_memory(m.data, g.weights) and np.shares_memory(m.indices, g.indices)
    np.testing.assert_allclose(m.toarray(), ref)
    t = g.to_torch()
    np.testing.assert_allclose(t.to_dense().numpy(), ref)
    assert t.crow_indices().data_ptr() == g.indptr.ctypes.data
    np.testing.assert_allclose(g.transposed().to_scipy().toarray(), ref.T)
    assert sorted(g.edge_ids.tolist()) == list(range(200))
    u = CSRGraph.from_edges(src, dst, w, n_nodes=50, directed=False)
    assert u.n_entries == 400
    np.testing.assert_allclose(u.to_scipy().toarray(), ref + ref.T)
    assert list(g.node_type[:4]) == [0, 1, 2, 0]
    with pytest.raises(ValueError, match="endpoints"):
        CSRGraph.from_edges([0], [60], n_nodes=50)


def brute_knapsack(values, weights, capacity):
    best = 0.0
    for r in range(len(values) + 1):
        for combo in itertools.combinations(range(len(values)), r):
            if sum(weights[i] for i in combo) <= capacity:
                best = max(best, sum(values[i] for i in combo))
    return best


@pytest.mark.parametrize("seed", range(30))
def test_knapsack_exact_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 13))
    values = rng.random(n).round(3)
    weights = rng.integers(0, 30, n)
    capacity = int(rng.integers(0, 80))
    res = knapsack(values, weights, capacity)
    assert res.exact and res.weight <= capacity
    assert res.value == pytest.approx(brute_knapsack(values, weights, capacity))
    assert res.value == pytest.approx(values[res.items].sum())


@pytest.mark.parametrize("seed", range(10))
def test_knapsack_approximation_is_feasible_and_close(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = 12
    values = rng.random(n)
    weights = rng.integers(100, 5000, n)
    capacity = int(weights.sum() * 0.4)
    res = knapsack(values, weights, capacity, max_cells=n * 50)  # forces the approximation
    best = brute_knapsack(values, weights, capacity)
    assert not res.exact and res.weight <= capacity
    assert res.value >= 0.5 * best
    assert res.value >= 0.85 * best  # rounding loses little in practice


def test_knapsack_large_budget_uses_approximation_quickly() -> None:
    rng = np.random.default_rng(5)
    values, weights = rng.random(20_000), rng.integers(50, 400, 20_000)
    res = knapsack(values, weights, int(weights.sum() * 0.3), max_cells=50_000_000)
    assert not res.exact and res.weight <= int(weights.sum() * 0.3)
    density_greedy = np.argsort(-values / weights)
    fits = density_greedy[np.cumsum(weights[density_greedy]) <= int(weights.sum() * 0.3)]
    assert res.value >= values[fits].sum() * 0.999


def test_rowwise_dot_compiled_equals_numpy_gathers() -> None:
    """Above JIT_PAIRS pairs the compiled kernel gives numpy's gather-multiply-sum (float64 sums,
    so within float32 rounding), float16 vector tables included."""
    from graphrag_engine.kernels import similarity

    rng = np.random.default_rng(4)
    q = rng.standard_normal((50, 384)).astype(np.float32)
    v = rng.standard_normal((2000, 384)).astype(np.float32)
    n = similarity.JIT_PAIRS + 500
    owner, rows = rng.integers(0, 50, n), rng.integers(0, 2000, n)
    want = np.einsum("ij,ij->i", q[owner].astype(np.float64), v[rows].astype(np.float64))
    got = similarity.rowwise_dot(q, owner, v, rows)
    assert got.dtype == np.float32 and got.shape == (n,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    half = similarity.rowwise_dot(q, owner, v.astype(np.float16), rows)
    np.testing.assert_allclose(half, got, rtol=1e-2, atol=0.2)
