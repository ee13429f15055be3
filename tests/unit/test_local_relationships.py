"""GraphRAG-style local search's relationship order, in arrays, against the loop it replaced."""

from __future__ import annotations

import numpy as np

from graphrag_engine.kernels.segments import csr_from_pairs
from graphrag_engine.retrieve.entity_graph import EntityGraph
from graphrag_engine.retrieve.local_search import relationships


def _reference(g: EntityGraph, selected: list[int], cap: int) -> list[int]:
    """The order as a loop: in-network by (rank, weight), then out-of-network by links of the
    far end to the selection, then rank; ties in first-seen order."""
    chosen = set(selected)
    rank = g.rank
    touching = list(dict.fromkeys(r for e in selected for r in g.relations_of(e).tolist()))
    inside = [r for r in touching if g.src[r] in chosen and g.dst[r] in chosen]
    outside = [r for r in touching if not (g.src[r] in chosen and g.dst[r] in chosen)]
    far = [int(g.dst[r] if g.src[r] in chosen else g.src[r]) for r in outside]
    links: dict[int, int] = {}
    for e in far:
        links[e] = links.get(e, 0) + 1
    inside.sort(key=lambda r: (-rank[r], -g.weight[r]))
    order = sorted(range(len(outside)), key=lambda i: (-links[far[i]], -rank[outside[i]]))
    return (inside + [outside[i] for i in order])[:cap]


def _graph(rng: np.random.Generator, n: int, m: int) -> EntityGraph:
    """A random entity graph with a hub (entity 0), repeated pairs and two weights (ties)."""
    src = np.concatenate([np.zeros(m // 3, np.int64), rng.integers(0, n, m - m // 3)])
    dst = (src + rng.integers(1, n, m)) % n  # no self-loops
    ends = np.concatenate([src, dst])
    indptr, rel_ids = csr_from_pairs(ends, np.concatenate([np.arange(m), np.arange(m)]), n)
    return EntityGraph(
        names=[f"e{i}" for i in range(n)],
        types=[""] * n,
        descriptions=[""] * n,
        src=src,
        dst=dst,
        rel_descriptions=[""] * m,
        rel_keywords=[""] * m,
        weight=rng.integers(1, 3, m).astype(np.float64),
        entity_chunks=[np.zeros(0, np.int64)] * n,
        relation_chunks=[np.zeros(0, np.int64)] * m,
        rel_indptr=indptr,
        rel_ids=rel_ids,
    )


def test_relationship_order_equals_the_loop() -> None:
    """Same relations in the same order, for selections with a hub, without one, one entity,
    none, and caps below and above the candidates."""
    rng = np.random.default_rng(7)
    g = _graph(rng, 60, 900)
    selections = [[0, 5, 9], [3, 4, 7, 8, 11, 12], [17], [], list(range(1, 30, 2))]
    for sel in selections:
        for cap in (1, 10, 10_000):
            assert relationships(g, sel, cap) == _reference(g, sel, cap), (sel, cap)


def test_a_masked_order_equals_the_order_of_the_subgraph_alone() -> None:
    """KET-RAG's skeleton: ordering with a relation mask and the subgraph's ranks equals
    ordering a graph that holds the kept relations only (its rows mapped back)."""
    rng = np.random.default_rng(11)
    g = _graph(rng, 60, 900)
    keep = rng.random(900) < 0.6
    rows = np.flatnonzero(keep)
    m = len(rows)
    ends = np.concatenate([g.src[rows], g.dst[rows]])
    indptr, rel_ids = csr_from_pairs(ends, np.concatenate([np.arange(m), np.arange(m)]), 60)
    sub = EntityGraph(
        names=g.names,
        types=g.types,
        descriptions=g.descriptions,
        src=g.src[rows],
        dst=g.dst[rows],
        rel_descriptions=[""] * m,
        rel_keywords=[""] * m,
        weight=g.weight[rows],
        entity_chunks=g.entity_chunks,
        relation_chunks=[np.zeros(0, np.int64)] * m,
        rel_indptr=indptr,
        rel_ids=rel_ids,
    )
    rank = np.zeros(900, np.int64)
    rank[rows] = sub.rank
    for sel in ([0, 5, 9], [3, 4, 7, 8, 11, 12], [17], list(range(1, 30, 2))):
        for cap in (1, 10, 10_000):
            masked = relationships(g, sel, cap, keep=keep, rank=rank)
            assert masked == rows[relationships(sub, sel, cap)].tolist(), (sel, cap)
