"""Shortest-path kernels against networkx on random graphs."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.paths import (
    all_shortest_paths,
    closest_pair,
    distances,
    shortest_paths,
    shortest_paths_from,
    simple_paths,
)


def random_pair(seed: int, n: int = 60, m: int = 180, directed: bool = True):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    # one weight per (u, v) so networkx (no multi-edges) sees the same graph
    pairs = {}
    for s, t in zip(src.tolist(), dst.tolist(), strict=True):
        key = (s, t) if directed else tuple(sorted((s, t)))
        pairs.setdefault(key, float(rng.integers(1, 10)))
    e = np.array(list(pairs))
    w = np.array(list(pairs.values()))
    g = CSRGraph.from_edges(e[:, 0], e[:, 1], w, n_nodes=n, directed=directed)
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    G.add_weighted_edges_from((int(a), int(b), float(x)) for (a, b), x in zip(e, w, strict=True))
    return g, G


def path_length(G, nodes, weighted=True):
    return sum(G[a][b]["weight"] if weighted else 1 for a, b in itertools.pairwise(nodes))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("directed", [True, False])
def test_shortest_paths_match_networkx(seed: int, weighted: bool, directed: bool) -> None:
    g, G = random_pair(seed, directed=directed)
    pairs = [(s, t) for s in range(0, 60, 7) for t in range(3, 60, 11)]
    found = shortest_paths(g, pairs, weighted=weighted)
    dist = distances(g, sorted({s for s, _ in pairs}), weighted=weighted)
    for (s, t), p in zip(pairs, found, strict=True):
        try:
            ref = nx.shortest_path_length(G, s, t, weight="weight" if weighted else None)
        except nx.NetworkXNoPath:
            assert p is None
            continue
        assert p is not None and p.nodes[0] == s and p.nodes[-1] == t
        assert p.length == pytest.approx(ref)
        assert path_length(G, p.nodes, weighted) == pytest.approx(ref), (
            "the path is real and that long"
        )
    assert dist.shape == (len({s for s, _ in pairs}), 60)


@pytest.mark.parametrize("seed", range(5))
def test_all_shortest_paths_match_networkx(seed: int) -> None:
    g, G = random_pair(seed, n=40, m=160)
    for s, t in [(0, 5), (1, 9), (2, 33), (7, 7)]:
        mine = {p.nodes for p in all_shortest_paths(g, s, t, max_hops=6, cap=10_000)}
        try:
            ref = {tuple(p) for p in nx.all_shortest_paths(G, s, t)}
        except nx.NetworkXNoPath:
            ref = set()
        if ref and len(next(iter(ref))) - 1 > 6:
            ref = set()
        assert mine == ref


def test_all_shortest_paths_hop_limit_and_cap() -> None:
    g, G = random_pair(3, n=40, m=160)
    ref = list(nx.all_shortest_paths(G, 0, 5))
    hops = len(ref[0]) - 1
    assert all_shortest_paths(g, 0, 5, max_hops=hops - 1) == []
    assert len(all_shortest_paths(g, 0, 5, max_hops=hops, cap=1)) == 1


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_shortest_paths_from_a_node_match_igraph_and_networkx(seed: int, directed: bool) -> None:
    """LEGO's SPF kernel: every shortest path from a source to every node it reaches is
    igraph's get_all_shortest_paths (the paper's implementation) and networkx's all shortest
    paths, within a hop limit too; a cap keeps the shortest first."""
    import igraph

    g, G = random_pair(seed, n=40, m=90, directed=directed)
    ig = igraph.Graph(n=40, edges=list(G.edges()), directed=directed)
    for s in (0, 3, 11):
        mine = shortest_paths_from(g, s)
        assert len(mine) == len(set(mine))
        assert set(mine) == {tuple(p) for p in ig.get_all_shortest_paths(s) if len(p) > 1}
        reach = nx.single_source_shortest_path_length(G, s)
        ref = {tuple(p) for t in reach if t != s for p in nx.all_shortest_paths(G, s, t)}
        assert set(mine) == ref
        two = shortest_paths_from(g, s, max_hops=2)
        assert set(two) == {p for p in ref if len(p) <= 3}
        assert [len(p) for p in mine] == sorted(len(p) for p in mine)  # shortest first
        assert shortest_paths_from(g, s, cap=5) == mine[:5]
        # the structure alone, as a scipy CSR array with parallel entries merged, walks the same
        ends = (g.tails, g.indices.astype(np.int64))
        structure = sp.csr_array((np.ones(g.n_entries, np.int32), ends), shape=(40, 40))
        assert shortest_paths_from(structure, s) == mine
        assert shortest_paths_from(structure, s, max_hops=2, cap=7) == two[:7]
        # within a node set: networkx's paths in the subgraph those nodes induce
        keep = np.random.default_rng(seed + s).random(40) < 0.6
        keep[s] = True
        H = G.subgraph(np.flatnonzero(keep).tolist())
        reach = nx.single_source_shortest_path_length(H, s)
        ref = {tuple(p) for t in reach if t != s for p in nx.all_shortest_paths(H, s, t)}
        inside = shortest_paths_from(g, s, within=keep)
        assert set(inside) == ref and len(inside) == len(ref)
        assert [(len(p), p) for p in inside] == sorted((len(p), p) for p in inside)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [2, 3, 4])
def test_simple_paths_match_networkx(seed: int, k: int) -> None:
    g, G = random_pair(seed, n=30, m=110)
    for s, t in [(0, 1), (2, 20), (5, 17)]:
        mine = {p.nodes for p in simple_paths(g, s, t, max_hops=k, cap=100_000)}
        ref = {tuple(p) for p in nx.all_simple_paths(G, s, t, cutoff=k)}
        assert mine == ref


def test_simple_paths_cap() -> None:
    g, G = random_pair(1, n=20, m=200)
    total = len(list(nx.all_simple_paths(G, 0, 1, cutoff=4)))
    assert total > 20
    assert len(simple_paths(g, 0, 1, max_hops=4, cap=20)) == 20


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weighted", [True, False])
def test_closest_pair_equals_brute_force(seed: int, weighted: bool) -> None:
    g, G = random_pair(seed, n=80, m=240)
    rng = np.random.default_rng(seed)
    a = rng.choice(80, 6, replace=False).tolist()
    b = [x for x in rng.choice(80, 10, replace=False).tolist() if x not in a]
    best = np.inf
    for s in a:
        lengths = nx.single_source_dijkstra_path_length(
            G, s, weight="weight" if weighted else lambda *_: 1
        )
        best = min([best] + [lengths[t] for t in b if t in lengths])
    p = closest_pair(g, a, b, weighted=weighted)
    if np.isinf(best):
        assert p is None
    else:
        assert p.length == pytest.approx(best)
        assert p.nodes[0] in a and p.nodes[-1] in b
        assert path_length(G, p.nodes, weighted) == pytest.approx(best)
