"""ReGraphRAG's Algorithm 1 (graphrag_engine/kernels/reorganize.py) against a brute-force networkx reference."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.reorganize import reorganize


def _random_case(seed: int):
    """A sparse weighted graph with several components, node vectors and 2-6 node groups."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(15, 40))
    g = nx.gnm_random_graph(n, int(rng.integers(n // 2, n)), seed=seed)
    for u, v in g.edges:
        g[u][v]["weight"] = float(rng.uniform(0.1, 3.0))  # continuous: no tied paths
    src, dst = zip(*g.edges, strict=True) if g.number_of_edges() else ((), ())
    w = [g[u][v]["weight"] for u, v in g.edges]
    csr = CSRGraph.from_edges(np.array(src), np.array(dst), np.array(w), n, directed=False)
    vectors = rng.normal(size=(n, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    groups = [
        rng.choice(n, size=int(rng.integers(1, 5)), replace=False).tolist()
        for _ in range(int(rng.integers(2, 7)))
    ]
    return g, csr, vectors, groups


def _reference(g: nx.Graph, groups, vectors):
    """Algorithm 1 written out pair by pair: all-pairs Dijkstra, then recomputed similarities."""
    cands = []
    for i, j in itertools.combinations(range(len(groups)), 2):
        best = None
        for u in groups[i]:
            for v in groups[j]:
                if nx.has_path(g, u, v):
                    d = nx.dijkstra_path_length(g, u, v)
                    if best is None or d < best[0]:
                        best = (d, nx.dijkstra_path(g, u, v))
        if best is not None:
            cands.append((best[0], i, j, best[1]))
    cands.sort(key=lambda c: (c[0], c[1], c[2]))
    comp = {i: set(gr) for i, gr in enumerate(groups)}
    owner = list(range(len(groups)))
    lengths = []
    for d, i, j, path in cands:
        a, b = owner[i], owner[j]
        if a == b:
            continue
        a, b = min(a, b), max(a, b)
        comp[a] |= comp.pop(b) | set(path)
        owner = [a if o == b else o for o in owner]
        lengths.append(d)
    after_paths = len(comp)
    bridges = []
    while len(comp) > 1:
        best = None
        for a, b in itertools.combinations(sorted(comp), 2):
            for u in comp[a]:
                for v in comp[b]:
                    s = float(vectors[u] @ vectors[v])
                    if best is None or s > best[0]:
                        best = (s, a, b, u, v)
        s, a, b, u, v = best
        bridges.append((frozenset((u, v)), s))
        comp[a] |= comp.pop(b)
    return set().union(*comp.values()), lengths, after_paths, bridges


@pytest.mark.parametrize("seed", range(25))
def test_reorganize_matches_brute_force(seed: int) -> None:
    g, csr, vectors, groups = _random_case(seed)
    got = reorganize(csr, groups, vectors, weighted=True)
    nodes, lengths, after_paths, bridges = _reference(g, groups, vectors)
    assert set(got.nodes.tolist()) == nodes
    assert [m[2] for m in got.merges] == pytest.approx(lengths)  # merged in path-length order
    assert got.components_after_paths == after_paths
    assert [(frozenset((u, v)), s) for u, v, s in got.bridges] == [
        (p, pytest.approx(s)) for p, s in bridges
    ]
    # one component at the end: groups, path edges and bridges connect every node
    h = nx.Graph()
    h.add_nodes_from(got.nodes.tolist())
    h.add_edges_from(got.path_edges)
    h.add_edges_from((u, v) for u, v, _ in got.bridges)
    for i, gr in enumerate(groups):
        h.add_edges_from((("group", i), u) for u in gr)
    assert nx.number_connected_components(h) == 1
    assert all(g.has_edge(u, v) for u, v in got.path_edges)  # step 1 adds only real edges
    assert got.path_nodes_added == len(nodes - set().union(*map(set, groups)))


def test_unweighted_paths_are_hop_counts_and_steps_switch_off() -> None:
    # 0-1-2-3 chain, 4-5 pair, 6 alone; groups {0}, {3}, {5}, {6}
    csr = CSRGraph.from_edges(np.array([0, 1, 2, 4]), np.array([1, 2, 3, 5]), None, 7, False)
    vectors = np.eye(7)
    vectors[6] = vectors[5]  # node 6 is most similar to node 5
    groups = [[0], [3], [5], [6]]
    full = reorganize(csr, groups, vectors, weighted=False)
    assert full.merges == [(0, 1, 3.0)]
    assert full.path_nodes_added == 2 and full.path_edges == [(0, 1), (1, 2), (2, 3)]
    assert full.components_after_paths == 3 and len(full.bridges) == 2
    assert tuple(sorted(full.bridges[0][:2])) == (5, 6) and full.bridges[0][2] == 1.0
    no_paths = reorganize(csr, groups, vectors, weighted=False, connect_by_paths=False)
    assert no_paths.merges == [] and no_paths.components_after_paths == 4
    assert len(no_paths.bridges) == 3
    none = reorganize(
        csr, groups, vectors, weighted=False, connect_by_paths=False, bridge_by_similarity=False
    )
    assert none.bridges == [] and none.nodes.tolist() == [0, 3, 5, 6]
