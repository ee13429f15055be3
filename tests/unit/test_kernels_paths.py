"""Shortest-path kernels against networkx on random graphs."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.paths import (
    distances,
    shortest_paths,
    shortest_paths_from,
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
