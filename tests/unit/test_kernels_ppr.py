"""PPR / RWR kernels against igraph and networkx on random graphs."""

from __future__ import annotations

import igraph as ig
import networkx as nx
import numpy as np
import pytest

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.ppr import PUSH_SHRINK, personalized_pagerank, random_walk_with_restart


def random_graph(
    seed: int, n: int = 400, m: int = 1600, directed: bool = True, weighted: bool = True
):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    w = rng.random(m) + 0.05 if weighted else np.ones(m)
    return src, dst, w, CSRGraph.from_edges(src, dst, w, n_nodes=n, directed=directed)


def igraph_ppr(src, dst, w, n, directed, seeds, damping):
    g = ig.Graph(n=n, edges=list(zip(src.tolist(), dst.tolist(), strict=True)), directed=directed)
    out = []
    for s in seeds:
        reset = np.zeros(n)
        if isinstance(s, dict):
            for node, weight in s.items():
                reset[node] += weight
        else:
            reset[list(s)] += 1
        out.append(
            g.personalized_pagerank(
                damping=damping, reset=reset.tolist(), weights=w.tolist(), directed=directed
            )
        )
    return np.array(out).T


SEEDS = [[0], [3, 17], {5: 0.2, 40: 0.8}, [1, 2, 3, 4, 5], [399]]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("damping", [0.5, 0.85])
@pytest.mark.parametrize(
    ("solver", "dtype"), [("power", "float64"), ("power", "mixed"), ("bicgstab", "float64")]
)
def test_exact_equals_igraph(
    seed: int, directed: bool, damping: float, solver: str, dtype: str
) -> None:
    src, dst, w, g = random_graph(seed, directed=directed)
    ref = igraph_ppr(src, dst, w, 400, directed, SEEDS, damping)
    res = personalized_pagerank(
        g, SEEDS, damping, tol=1e-12, batch_size=2, solver=solver, dtype=dtype
    )
    assert res.dense.shape == (400, len(SEEDS))
    assert np.abs(res.dense - ref).max() < (1e-9 if dtype == "float64" else 1e-6)
    np.testing.assert_allclose(
        res.dense.sum(axis=0), 1.0, atol=1e-9 if dtype == "float64" else 1e-6
    )


def test_graph_with_many_dangling_nodes_float32() -> None:
    """A sparse directed graph where most nodes have no out-edges: the walk restarts at the seeds."""
    src, dst, w, g = random_graph(7, n=300, m=150)
    assert g.dangling.sum() > 100
    ref = igraph_ppr(src, dst, w, 300, True, SEEDS[:4], 0.85)
    for solver in ("power", "bicgstab"):
        res = personalized_pagerank(g, SEEDS[:4], 0.85, tol=1e-10, dtype="float32", solver=solver)
        assert np.abs(res.dense - ref).max() < 1e-6


def test_exact_equals_networkx() -> None:
    src, dst, w, g = random_graph(3, n=200, m=900)
    G = nx.DiGraph()
    G.add_nodes_from(range(200))
    for s, t, x in zip(src.tolist(), dst.tolist(), w.tolist(), strict=True):
        G.add_edge(s, t, weight=G.get_edge_data(s, t, {"weight": 0})["weight"] + x)
    res = personalized_pagerank(g, [[10, 11]], 0.85, tol=1e-12, dtype="float64")
    ref = nx.pagerank(
        G, alpha=0.85, personalization={10: 1, 11: 1}, weight="weight", tol=1e-13, max_iter=1000
    )
    assert np.abs(res.dense[:, 0] - np.array([ref[i] for i in range(200)])).max() < 1e-6


def test_rwr_is_ppr_with_damping_one_minus_restart() -> None:
    src, dst, w, g = random_graph(4, directed=False)
    rwr = random_walk_with_restart(g, SEEDS, restart_prob=0.8, tol=1e-12, dtype="float64")
    ref = igraph_ppr(src, dst, w, 400, False, SEEDS, 0.2)
    assert np.abs(rwr.dense - ref).max() < 1e-6


@pytest.mark.parametrize("damping", [0.5, 0.85])
@pytest.mark.parametrize("eps", [1e-4, 1e-6, 1e-8])
def test_local_push_error_bound_holds(damping: float, eps: float) -> None:
    src, dst, w, g = random_graph(5, n=2000, m=8000)
    seeds = [[i, i + 7] for i in range(0, 60, 3)]
    exact = personalized_pagerank(
        g, seeds, damping, tol=1e-13, max_iter=1000, dtype="float64"
    ).dense
    local = personalized_pagerank(g, seeds, damping, mode="local", eps=eps)
    approx = local.to_dense()
    assert np.all(approx <= exact + 1e-12), "push never overshoots"
    gap = (exact - approx).sum(axis=0)
    # the reported bound is the exact L1 gap (up to the exact solver's own tolerance)
    np.testing.assert_allclose(gap, local.error_bound, atol=1e-9)
    assert np.all(np.abs(exact - approx).max(axis=0) <= local.error_bound + 1e-12)
    # the residual threshold bounds what is left: eps * degree per node
    assert np.all(local.error_bound <= eps * max(g.n_entries, 1))


def test_local_push_is_local_and_accurate_at_small_eps() -> None:
    _, _, _, g = random_graph(6, n=5000, m=15000)
    hubs = np.argsort(-g.out_degree)[:3].tolist()
    seeds = [[hubs[0]], hubs[1:]]
    local = personalized_pagerank(g, seeds, 0.5, mode="local", eps=1e-3)
    assert local.node.size < 0.2 * g.n_nodes * len(seeds), "push touches only a neighbourhood"
    exact = personalized_pagerank(g, seeds, 0.5, tol=1e-12)
    en, es = exact.topk(20)
    ln, _ = personalized_pagerank(g, seeds, 0.5, mode="local", eps=1e-9).topk(20)
    for q in range(len(seeds)):
        assert es[q, -1] > 0
        assert len(set(en[q]) & set(ln[q])) >= 19


def test_topk_order_and_padding() -> None:
    _, _, _, g = random_graph(8, n=50, m=10)
    res = personalized_pagerank(g, [[0]], 0.85, mode="local", eps=1e-9)
    nodes, scores = res.topk(60)
    assert nodes[0, 0] == 0 and np.all(np.diff(scores[0][nodes[0] >= 0]) <= 0)
    assert (nodes[0] == -1).sum() == 60 - (res.to_dense()[:, 0] > 0).sum()
    exact_nodes, exact_scores = personalized_pagerank(g, [[0]], 0.85).topk(5)
    assert exact_nodes[0, 0] == 0 and np.all(np.diff(exact_scores[0]) <= 0)


def test_bad_seeds_rejected() -> None:
    _, _, _, g = random_graph(0, n=10, m=20)
    with pytest.raises(ValueError, match="no seed"):
        personalized_pagerank(g, [[]])
    with pytest.raises(ValueError, match="outside"):
        personalized_pagerank(g, [[10]])
    with pytest.raises(ValueError, match="damping"):
        personalized_pagerank(g, [[1]], damping=1.0)


def test_seed_arrays_equal_the_same_seeds_as_a_dict() -> None:
    _, _, _, g = random_graph(3, n=40, m=120)
    nodes, weights = np.array([2, 7, 11]), np.array([0.5, 0.2, 0.3])
    as_dict = personalized_pagerank(
        g, [dict(zip(nodes.tolist(), weights.tolist(), strict=True))], 0.5
    )
    as_arrays = personalized_pagerank(g, [(nodes, weights)], 0.5)
    np.testing.assert_allclose(as_arrays.to_dense(), as_dict.to_dense(), atol=1e-12)
    with pytest.raises(ValueError, match="weights"):
        personalized_pagerank(g, [(nodes, weights[:2])])


@pytest.mark.gpu
def test_exact_on_cuda_matches_cpu() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    _, _, _, g = random_graph(9)
    cpu = personalized_pagerank(g, SEEDS, 0.85, tol=1e-12, dtype="float64").dense
    gpu = personalized_pagerank(g, SEEDS, 0.85, tol=1e-12, device="cuda", dtype="float64").dense
    assert np.abs(cpu - gpu).max() < 1e-9


@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_exact_batched_equals_one_query_at_a_time(damping: float) -> None:
    """Each column stops when it converges, as it would alone, whatever other queries share the
    batch (they converge at different steps): the same scores up to the float32 rounding of the
    sparse products. Not bit for bit: torch 2.11 on a 16-core host sums a product column in
    another order for 40 columns than for one (seen on the lent GPU machine's CPU), while this
    machine's build gives identical bits."""
    _, _, _, g = random_graph(11, n=3000, m=12000)
    rng = np.random.default_rng(4)
    seeds = [rng.choice(3000, int(rng.integers(1, 6)), replace=False).tolist() for _ in range(40)]
    batched = personalized_pagerank(g, seeds, damping, tol=1e-9).dense
    alone = np.stack(
        [personalized_pagerank(g, [s], damping, tol=1e-9).dense[:, 0] for s in seeds], 1
    )
    np.testing.assert_allclose(batched, alone, rtol=2e-6, atol=1e-12)
    float64 = personalized_pagerank(g, seeds, damping, tol=1e-9, dtype="float64").dense
    np.testing.assert_allclose(batched, float64, rtol=2e-6, atol=1e-8)  # rounding, not drift


def reference_push(
    g: CSRGraph, seeds: list[int], damping: float, eps: float, shrink: float
) -> np.ndarray:
    """The phased FIFO forward push written plainly in Python, to check the compiled loop.

    A node is queued when its residual reaches bar * eps * out_degree; when the queue runs dry
    the bar shrinks (it starts at the largest seed's level, ends at 1) and every touched node
    that reaches it is queued, in the order nodes were first touched.
    """
    from collections import deque

    n = g.n_nodes
    residual, score = np.zeros(n), np.zeros(n)
    threshold = eps * np.maximum(g.out_degree, 1)
    step = damping * g.transition_weights
    weights: dict[int, float] = {}
    for s in seeds:
        weights[s] = weights.get(s, 0.0) + 1.0 / len(seeds)
    touched = list(weights)
    for s, w in weights.items():
        residual[s] += w
    bar = max([1.0] + [residual[s] / threshold[s] for s in weights])
    queue: deque[int] = deque()
    while True:
        queue.extend(u for u in touched if residual[u] >= bar * threshold[u])
        while queue:
            u = queue.popleft()
            r, residual[u] = residual[u], 0.0
            score[u] += (1 - damping) * r
            if g.dangling[u]:  # back to the seeds
                moves = [(s, damping * r * w) for s, w in weights.items()]
            else:
                lo, hi = g.indptr[u], g.indptr[u + 1]
                moves = zip(g.indices[lo:hi].tolist(), (r * step[lo:hi]).tolist(), strict=True)
            for v, mass in moves:
                if residual[v] == 0 and score[v] == 0 and v not in weights:
                    touched.append(v)
                residual[v] += mass
                if residual[v] >= bar * threshold[v] and v not in queue:
                    queue.append(v)
        if bar <= 1.0:
            return score + (1 - damping) * residual
        bar = max(1.0, bar / shrink)


@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_local_push_equals_python_reference_and_one_at_a_time(damping: float) -> None:
    """The compiled push gives the plain Python push's scores; a batch equals its queries alone."""
    _, _, _, g = random_graph(12, n=1500, m=5000)
    rng = np.random.default_rng(5)
    seeds = [rng.choice(1500, int(rng.integers(1, 4)), replace=False).tolist() for _ in range(12)]
    res = personalized_pagerank(g, seeds, damping, mode="local", eps=1e-6)
    dense = res.to_dense()
    for q, s in enumerate(seeds):
        ref = reference_push(g, s, damping, 1e-6, PUSH_SHRINK)
        np.testing.assert_allclose(dense[:, q], ref, rtol=1e-9, atol=1e-15)
        alone = personalized_pagerank(g, [s], damping, mode="local", eps=1e-6)
        assert np.array_equal(alone.to_dense()[:, 0], dense[:, q])
        assert alone.error_bound[0] == res.error_bound[q]


@pytest.mark.parametrize("solver", ["power", "bicgstab"])
def test_exact_topk_keeps_the_dense_top_k(solver: str) -> None:
    """topk=k returns each query's k best positive entries of the dense result, ties at the cut
    to the lowest ids (tree leaves tie), for blocks of any size (BiCGSTAB stops a block when
    its slowest column converges, so its reference is computed with the same blocks)."""
    rng = np.random.default_rng(9)
    tree_src = np.repeat(np.arange(30), 10)  # 30 parents with 10 leaves each: tied scores
    tree_dst = 30 + np.arange(300)
    src = np.concatenate([tree_src, rng.integers(0, 330, 600)])
    dst = np.concatenate([tree_dst, rng.integers(0, 330, 600)])
    g = CSRGraph.from_edges(src, dst, n_nodes=400)  # nodes 330..399 are unreachable
    seeds = [[0], [1, 2], {3: 2.0, 40: 1.0}, [399]] + [[int(s)] for s in rng.integers(0, 330, 9)]
    for k, block in [(5, 64), (25, 4), (500, 3)]:
        kw = dict(solver=solver, dtype="float64", batch_size=block)
        dense = personalized_pagerank(g, seeds, 0.85, **kw)
        kept = personalized_pagerank(g, seeds, 0.85, topk=k, **kw)
        want_nodes, want_scores = dense.topk(k)
        got_nodes, got_scores = kept.topk(k)
        positive = want_scores > 0
        assert np.array_equal(np.where(positive, want_nodes, -1), got_nodes)
        np.testing.assert_array_equal(np.where(positive, want_scores, 0), got_scores)
        assert np.bincount(kept.query, minlength=len(seeds)).max() <= k


@pytest.mark.parametrize("mode", ["exact", "local"])
def test_within_keeps_the_best_of_one_node_range(mode: str) -> None:
    """within=(lo, hi) with topk=k gives each query the k best nodes of [lo, hi) of the full
    result (ties at the cut to the lowest ids), whatever the nodes outside the range score."""
    rng = np.random.default_rng(5)
    tree_src = np.repeat(np.arange(30), 10)  # tied leaves inside the range
    src = np.concatenate([tree_src, rng.integers(0, 330, 900)])
    dst = np.concatenate([30 + np.arange(300), rng.integers(0, 330, 900)])
    g = CSRGraph.from_edges(src, dst, n_nodes=330)
    seeds = [[0], [1, 2], {3: 2.0, 40: 1.0}] + [[int(s)] for s in rng.integers(0, 330, 6)]
    lo, hi = 30, 200
    kw = dict(mode=mode, dtype="float64", eps=1e-9)
    full = personalized_pagerank(g, seeds, 0.5, **kw).to_dense()
    for k in (3, 40, 400):
        kept = personalized_pagerank(g, seeds, 0.5, topk=k, within=(lo, hi), **kw)
        nodes, scores = kept.topk(k)
        for q in range(len(seeds)):
            col = full[lo:hi, q]
            order = np.lexsort((np.arange(col.size), -col))
            want = [lo + i for i in order if col[i] > 0][:k]
            assert nodes[q][nodes[q] >= 0].tolist() == want
            np.testing.assert_allclose(scores[q][: len(want)], full[want, q], rtol=1e-12)


def test_within_needs_topk_and_a_range_inside_the_graph() -> None:
    _, _, _, g = random_graph(1)
    for bad in (dict(within=(0, 5)), dict(topk=3, within=(5, g.n_nodes + 1))):
        with pytest.raises(ValueError, match="within"):
            personalized_pagerank(g, [[0]], **bad)


def test_exact_topk_rejects_a_non_positive_k() -> None:
    _, _, _, g = random_graph(1)
    with pytest.raises(ValueError, match="topk"):
        personalized_pagerank(g, [[0]], topk=0)


@pytest.mark.parametrize("kw", [{}, {"topk": 5}, {"mode": "local"}])
def test_an_empty_batch_gives_a_result_of_zero_queries(kw: dict) -> None:
    _, _, _, g = random_graph(2)
    res = personalized_pagerank(g, [], **kw)
    assert res.n_queries == 0
    nodes, scores = res.topk(5)
    assert nodes.shape == (0, 5) and scores.shape == (0, 5)
    assert res.to_dense().shape == (g.n_nodes, 0)


def test_transition_T_is_the_walk_step_transposed() -> None:
    """P^T from the CSR graph equals networkx's row-normalised weight matrix transposed, with
    parallel edges summed and dangling rows (no out-weight) all zero."""
    src, dst, w, g = random_graph(9, n=60, m=200)
    src, dst = np.append(src, [3, 3]), np.append(dst, [5, 5])  # a parallel edge pair
    w = np.append(w, [0.5, 0.25])
    g = CSRGraph.from_edges(src, dst, w, n_nodes=60)
    nxg = nx.MultiDiGraph()
    nxg.add_nodes_from(range(60))
    nxg.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), w.tolist(), strict=True))
    a = nx.to_numpy_array(nxg, nodelist=range(60), weight="weight")  # parallel edges summed
    out = a.sum(1, keepdims=True)
    p = np.divide(a, out, out=np.zeros_like(a), where=out > 0)
    np.testing.assert_allclose(g.transition_T().toarray(), p.T, atol=1e-12)
    assert g.transition_T() is g.transition_T()  # built once per graph
