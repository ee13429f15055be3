"""ReGraphRAG's triplets as arrays order, identify and label exactly as one object per edge
does: the sort by score then key, the identity across perspectives, the components."""

from __future__ import annotations

import networkx as nx
import numpy as np

from graphrag_engine.methods.regraphrag.triplets import (
    Triplet,
    Triplets,
    component_labels,
    graph_components,
    graph_nodes,
)


def _random_triplets(rng: np.random.Generator, n: int) -> list[Triplet]:
    """Edges among 12 nodes, some bridges (relation -1), scores with many ties."""
    out = []
    for _ in range(n):
        a, b = (int(x) for x in rng.integers(0, 12, 2))
        out.append(Triplet(a, b, int(rng.integers(-1, 6)), float(rng.integers(0, 4)) / 4))
    return out


def test_best_first_sorts_as_score_then_key() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        objs = _random_triplets(rng, int(rng.integers(0, 30)))
        want = sorted(objs, key=lambda t: (-t.score, t.key))
        got = list(Triplets.of(objs).best_first())
        assert [(t.a, t.b, t.relation, t.score) for t in got] == [
            (t.a, t.b, t.relation, t.score) for t in want
        ]


def test_keys_are_equal_exactly_when_the_edges_are_the_same() -> None:
    rng = np.random.default_rng(5)
    objs = [t for t in _random_triplets(rng, 200) if t.relation < 0]  # bridges: unordered pairs
    objs += [Triplet(3, 7, r) for r in range(5)]  # a relation row names its ends
    keys = Triplets.of(objs).keys.tolist()
    for i, s in enumerate(objs):
        for j, t in enumerate(objs):
            assert (keys[i] == keys[j]) == (s.key == t.key)
    big = Triplets.of([Triplet(2**31 - 1, 2**31 - 2, -1), Triplet(2**31 - 2, 2**31 - 1, -1)])
    assert big.keys[0] == big.keys[1] and big.keys[0] < 0


def test_take_joined_and_masks_keep_the_order() -> None:
    ts = Triplets.of([Triplet(1, 2, 0, 0.5), Triplet(2, 3, 1, 0.9), Triplet(4, 5, -1, 0.1)])
    assert [t.relation for t in ts.take(np.array([False, True, True]))] == [1, -1]
    assert [t.relation for t in ts.take([2, 0])] == [-1, 0]
    assert [t.relation for t in ts.take(slice(1, None))] == [1, -1]
    both = Triplets.joined([ts.take([2]), ts.take([0, 1])])
    assert [t.relation for t in both] == [-1, 0, 1] and len(Triplets.joined([])) == 0


def test_components_match_networkx() -> None:
    rng = np.random.default_rng(11)
    for _ in range(30):
        objs = _random_triplets(rng, int(rng.integers(0, 10)))
        nodes = np.unique(rng.integers(0, 12, int(rng.integers(1, 6))))
        every = graph_nodes(nodes, Triplets.of(objs))
        count, labels = component_labels(every, Triplets.of(objs))
        g = nx.Graph()
        g.add_nodes_from(every.tolist())
        g.add_edges_from((t.a, t.b) for t in objs)
        want = sorted(sorted(c) for c in nx.connected_components(g))
        got = graph_components(every, labels)
        assert count == len(want) and sorted(got) == want
        assert [c[0] for c in got] == sorted(c[0] for c in got)  # ordered by smallest node
