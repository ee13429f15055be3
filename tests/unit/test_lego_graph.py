"""LEGO's triple graph operators against plain-Python references: the induced triples of a node
set, the per-question subgraph blocks and the relation lookup of path rendering."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.methods.lego.graph import InducedCut, TripleGraph, names_of
from graphrag_engine.methods.lego.paths import PathText


def _graph(seed: int, n: int = 120, m: int = 700, shared: bool = True) -> TripleGraph:
    rng = np.random.default_rng(seed)
    heads, tails = rng.integers(0, n, m), rng.integers(0, n, m)  # loops and parallels included
    owner = np.full(m, -1 if shared else 0, np.int64)
    return TripleGraph(
        [f"n{i}" for i in range(n)],
        np.full(n, -1 if shared else 0, np.int64),
        heads.astype(np.int64),
        tails.astype(np.int64),
        [f"r{e}" for e in range(m)],
        owner,
        np.arange(n, dtype=np.int64),
    )


def test_induced_edges_equal_a_scan_of_every_triple() -> None:
    tg = _graph(1)
    rng = np.random.default_rng(2)
    member = np.zeros(tg.n_nodes, dtype=bool)
    for size in (0, 1, 7, 60, tg.n_nodes):
        nodes = np.sort(rng.choice(tg.n_nodes, size, replace=False))
        member[nodes] = True
        want = np.flatnonzero(member[tg.heads] & member[tg.tails])
        assert tg.induced_edges(nodes, member).tolist() == want.tolist()
        member[nodes] = False


def test_subgraph_blocks_equal_the_dictionary_reference() -> None:
    tg = _graph(3)
    rng = np.random.default_rng(4)
    nodes = [np.unique(rng.choice(tg.n_nodes, k)) for k in (5, 40, 0, 90)]
    edges = [np.sort(rng.choice(tg.heads.size, 200, replace=False)) for _ in nodes]
    sub = tg.subgraphs(nodes, edges)
    names, heads, tails, rels, e_owner = [], [], [], [], []
    for q, (ns, es) in enumerate(zip(nodes, edges, strict=True)):
        local = {int(n): len(names) + i for i, n in enumerate(ns)}
        names.extend(tg.names[int(n)] for n in ns)
        for e in es:
            h, t = int(tg.heads[e]), int(tg.tails[e])
            if h in local and t in local:
                heads.append(local[h])
                tails.append(local[t])
                rels.append(tg.relations[e])
                e_owner.append(q)
    assert list(sub.names) == names and list(sub.relations) == rels
    assert sub.names[3:50] == names[3:50] and names_of(sub, [7, 0, 7]) == [
        names[i] for i in (7, 0, 7)
    ]
    assert sub.heads.tolist() == heads and sub.tails.tolist() == tails
    assert sub.edge_owner.tolist() == e_owner
    assert sub.origin.tolist() == np.concatenate(nodes).tolist()
    # a block of a block names what the first graph names, read through one pick
    again = sub.subgraphs([np.arange(10, 60)], [np.arange(sub.heads.size)])
    assert list(again.names) == names[10:60] and again.names.render.__self__ is tg.names
    # the structure alone: every node's neighbours both ways, parallel triples once
    adjacency = sub.adjacency
    for node in range(sub.n_nodes):
        row = adjacency.indices[adjacency.indptr[node] : adjacency.indptr[node + 1]]
        want = {t for h, t in zip(heads, tails, strict=True) if h == node}
        want |= {h for h, t in zip(heads, tails, strict=True) if t == node}
        assert sorted(row.tolist()) == sorted(want)


def test_path_text_finds_every_relation_between_two_nodes_in_row_order() -> None:
    tg = _graph(5, n=30, m=200)
    pairs: dict[tuple[int, int], list[int]] = {}
    for e, (h, t) in enumerate(zip(tg.heads.tolist(), tg.tails.tolist(), strict=True)):
        pairs.setdefault((h, t), []).append(e)
        if h != t:
            pairs.setdefault((t, h), []).append(e)
    text = PathText(tg)
    for u in range(tg.n_nodes):
        for v in range(tg.n_nodes):
            assert text._between(u, v) == pairs.get((u, v), [])
    u, v = next(iter(pairs))
    shown = text.show((u, v))
    assert shown.startswith(f"n{u} ") and shown.endswith(f" n{v}")


def test_an_induced_cut_equals_the_gathered_subgraph() -> None:
    """SE without a scorer keeps a lazy cut: its triples, counts, shortest paths and rendered
    paths equal those of the subgraph gathered from the same nodes' induced triples."""
    tg = _graph(6, n=150, m=900)
    rng = np.random.default_rng(7)
    nodes = [np.unique(rng.choice(tg.n_nodes, k)) for k in (30, 0, 90, 150)]
    member = np.zeros(tg.n_nodes, dtype=bool)
    edges = []
    for ns in nodes:
        member[ns] = True
        edges.append(tg.induced_edges(ns, member))
        member[ns] = False
    full = tg.subgraphs(nodes, edges)
    cut = InducedCut(tg, nodes)
    assert cut.edge_counts(len(nodes)).tolist() == full.edge_counts(len(nodes)).tolist()
    assert "_triples" not in cut.__dict__  # counted, not gathered
    assert list(cut.names) == list(full.names) and cut.origin.tolist() == full.origin.tolist()
    assert cut.node_owner.tolist() == full.node_owner.tolist()
    for row in rng.choice(cut.n_nodes, 25, replace=False).tolist():
        for hops, cap in ((2, 1000), (3, 40)):
            assert cut.shortest_paths(row, hops, cap) == full.shortest_paths(row, hops, cap)
    shown, want = PathText(cut), PathText(full)
    for row in (0, 40, 200):
        for path in full.shortest_paths(row, 3, 50):
            assert shown.show(path) == want.show(path)
            assert shown.words(path) == want.words(path)
    assert not cut._member.any()  # the scratch mask is left clear
    assert cut.heads.tolist() == full.heads.tolist() and cut.tails.tolist() == full.tails.tolist()
    assert list(cut.relations) == list(full.relations)
    assert cut.edge_owner.tolist() == full.edge_owner.tolist()
    with pytest.raises(ValueError, match="ascending"):
        InducedCut(tg, [np.asarray([5, 3])])
