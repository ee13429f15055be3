"""ReGraphRAG's triplets: the edges of a perspective's reorganized graph held as parallel arrays
(ends, relation row, score), so that scoring, sorting, grouping, the chunk pick and the
component count cost a few array operations a question however many relations its nodes touch
(about 365 a question at twice MuSiQue's corpus, 45 at an eighth of it). A `Triplet` object is
built only for a line a budget keeps, and for the texts that are embedded."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from graphrag_engine.kernels.components_jit import edge_components
from graphrag_engine.kernels.reorganize import Reorganization
from graphrag_engine.kernels.segments import csr_gather
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import EntityGraph

PAIR_BITS = 31
"""A bridge's identity packs its two ends (entity rows below 2**31) into one int64."""


@dataclass(slots=True)
class Triplet:
    """One edge of a reorganized graph: a relation row, or a bridge (relation -1)."""

    a: int
    b: int
    relation: int
    score: float = 0.0
    key: tuple[int, int, int] = field(init=False, repr=False, compare=False)
    """Identity across perspectives (a bridge is its unordered node pair), and the order of
    equal scores."""

    def __post_init__(self) -> None:
        self.key = (min(self.a, self.b), max(self.a, self.b), self.relation)


@dataclass
class Triplets:
    """A perspective's edges in their order, as parallel arrays: ends `a` and `b`, the relation
    row (-1: a bridge) and the score (0 until reranked)."""

    a: np.ndarray
    b: np.ndarray
    relation: np.ndarray
    score: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.a = np.asarray(self.a, dtype=np.int64)
        self.b = np.asarray(self.b, dtype=np.int64)
        self.relation = np.asarray(self.relation, dtype=np.int64)
        size = self.a.size
        self.score = np.zeros(size) if self.score is None else np.asarray(self.score, float)

    @classmethod
    def of(cls, items: Sequence[Triplet]) -> Triplets:
        """Triplet objects as arrays, in their order."""
        return cls(
            [t.a for t in items],
            [t.b for t in items],
            [t.relation for t in items],
            [t.score for t in items],
        )

    @classmethod
    def joined(cls, parts: Sequence[Triplets]) -> Triplets:
        """Several lists of triplets one after another."""
        if not parts:
            return cls.of([])
        fields = ("a", "b", "relation", "score")
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))

    def __len__(self) -> int:
        """How many triplets there are."""
        return int(self.a.size)

    def __getitem__(self, i: int) -> Triplet:
        """Triplet i as an object (for its texts)."""
        a, b, relation = int(self.a[i]), int(self.b[i]), int(self.relation[i])
        return Triplet(a, b, relation, float(self.score[i]))

    def __iter__(self) -> Iterator[Triplet]:
        """Every triplet as an object, in order."""
        return (self[i] for i in range(len(self)))

    def take(self, rows: np.ndarray | Sequence[int] | slice) -> Triplets:
        """The triplets at `rows` (positions, a boolean mask or a slice), in that order."""
        if not isinstance(rows, slice):
            rows = np.asarray(rows)
            rows = rows if rows.dtype == bool else rows.astype(np.int64)
        return Triplets(self.a[rows], self.b[rows], self.relation[rows], self.score[rows])

    @property
    def keys(self) -> np.ndarray:
        """Each triplet's identity across perspectives as one int64: its relation row (a
        relation row names its two ends), or -1 - (low end << PAIR_BITS | high end) for a
        bridge, which is its unordered pair of ends."""
        low, high = np.minimum(self.a, self.b), np.maximum(self.a, self.b)
        return np.where(self.relation >= 0, self.relation, -1 - ((low << PAIR_BITS) | high))

    def best_first(self) -> Triplets:
        """Sorted by score, highest first; equal scores by (low end, high end, relation), the
        order of `Triplet.key`."""
        low, high = np.minimum(self.a, self.b), np.maximum(self.a, self.b)
        return self.take(np.lexsort((self.relation, high, low, -self.score)))


def triplets(g: EntityGraph, graph: Reorganization, edges: str) -> Triplets:
    """Every relation touching (`incident`) or among (`among`) the reorganized nodes, in
    relation order, then the bridges. Read from the nodes' own relation lists, so the cost
    follows their degrees, not the graph's size."""
    nodes = np.asarray(graph.nodes, dtype=np.int64)
    _, slots = csr_gather(g.rel_indptr, nodes)
    rels = np.unique(g.rel_ids[slots]).astype(np.int64)
    if edges == "among":
        rels = rels[np.isin(g.src[rels], nodes) & np.isin(g.dst[rels], nodes)]
    bridges = np.asarray([(u, v) for u, v, _ in graph.bridges], dtype=np.int64).reshape(-1, 2)
    return Triplets(
        np.concatenate([g.src[rels], bridges[:, 0]]),
        np.concatenate([g.dst[rels], bridges[:, 1]]),
        np.concatenate([rels, np.full(len(bridges), -1, np.int64)]),
    )


def describe(g: EntityGraph, t: Triplet) -> str:
    """The edge's description: the relation's, or a bridge's two end descriptions joined."""
    return _description(g, t.a, t.b, t.relation)


def _description(g: EntityGraph, a: int, b: int, relation: int) -> str:
    if relation >= 0:
        return g.rel_descriptions[relation] or "co-occurrence"
    return " ".join([g.descriptions[a] or g.names[a], g.descriptions[b] or g.names[b]])


def edge_text(g: EntityGraph, t: Triplet) -> str:
    """What reranking embeds: the two ends, the edge's description and the ends' own."""
    own = "; ".join(d for d in (g.descriptions[t.a], g.descriptions[t.b]) if d)
    return f"{g.names[t.a]} - {g.names[t.b]}: {describe(g, t)}" + (f" ({own})" if own else "")


def triplet_text(g: EntityGraph, t: Triplet) -> str:
    """A triplet as the paper's sentence: its ends connected by the edge's description."""
    return sentence(g, t.a, t.b, t.relation)


def sentence(g: EntityGraph, a: int, b: int, relation: int) -> str:
    """`triplet_text` of the edge (a, b, relation), without a Triplet object."""
    return f"{g.names[a]} is connected to {g.names[b]} with {_description(g, a, b, relation)} relation."


def sentences(g: EntityGraph, ts: Triplets) -> Callable[[int], str]:
    """Triplet i's sentence, built when it is asked for."""
    ends = ts.a.tolist(), ts.b.tolist(), ts.relation.tolist()
    return lambda i: sentence(g, ends[0][i], ends[1][i], ends[2][i])


def behind(g: EntityGraph, t: Triplet) -> np.ndarray:
    """The chunks a triplet came from: its relation's, or a bridge's two ends'."""
    if t.relation >= 0:
        return g.relation_chunks[t.relation]
    return np.concatenate([g.entity_chunks[t.a], g.entity_chunks[t.b]])


def chunks_behind(ctx: QueryContext, g: EntityGraph, ts: Triplets) -> np.ndarray:
    """`behind` of every triplet, one after another, in one gather: the index's relation and
    entity chunk lists are laid out once a run as one CSR whose rows are the relations, then
    the entities."""
    indptr, chunks = ctx.memo("regraphrag_chunk_rows", lambda: _chunk_rows(g))
    n_rel = len(g.relation_chunks)
    bridge = ts.relation < 0
    first = np.where(bridge, n_rel + ts.a, ts.relation)
    second = np.where(bridge, n_rel + ts.b, -1)
    rows = np.stack([first, second], axis=1).ravel()
    _, slots = csr_gather(indptr, rows[rows >= 0])
    return chunks[slots]


def _chunk_rows(g: EntityGraph) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, chunk rows) of every relation's chunk list, then every entity's."""
    lists = [*g.relation_chunks, *g.entity_chunks]
    sizes = np.fromiter((len(c) for c in lists), dtype=np.int64, count=len(lists))
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    flat = np.concatenate(lists).astype(np.int64) if lists else np.zeros(0, np.int64)
    return indptr, flat


def sentence_tokens(g: EntityGraph, counts: np.ndarray | None, ts: Triplets) -> np.ndarray:
    """Stored tokens of each triplet's sentence (`counts`: every relation's, by row, its ends
    in the graph's order), -1 where none is stored (a bridge, ends the other way round)."""
    out = np.full(len(ts), -1, dtype=np.int64)
    if counts is None:
        return out
    rel = np.maximum(ts.relation, 0)
    stored = (ts.relation >= 0) & (g.src[rel] == ts.a) & (g.dst[rel] == ts.b)
    out[stored] = counts[rel[stored]]
    return out


# -- components ---------------------------------------------------------------------------------
def graph_nodes(nodes: np.ndarray, ts: Triplets) -> np.ndarray:
    """A reorganized graph's nodes and its triplets' far ends, ascending."""
    return np.union1d(np.asarray(nodes, dtype=np.int64), np.concatenate([ts.a, ts.b]))


def component_labels(nodes: np.ndarray, ts: Triplets) -> tuple[int, np.ndarray]:
    """Connected components of a node graph whose edges are the triplets (`nodes` ascending,
    holding every triplet end): their count and each node's label."""
    if not nodes.size:
        return 0, np.zeros(0, dtype=np.int32)
    rows, cols = np.searchsorted(nodes, ts.a), np.searchsorted(nodes, ts.b)
    count, labels = edge_components(nodes.size, rows, cols)
    return int(count), labels


def graph_components(nodes: np.ndarray, labels: np.ndarray) -> list[list[int]]:
    """Each component's nodes (ascending), components in label order."""
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    return [part.tolist() for part in np.split(nodes[order], cuts)] if nodes.size else []


def question_components(nodes: list[np.ndarray], ts: Triplets) -> list[list[int]]:
    """The components of a question's whole reorganized graph (every perspective's nodes and
    triplets together), each as its ascending entity ids: what the bench checks gold against."""
    every = graph_nodes(np.concatenate(nodes) if nodes else np.zeros(0, np.int64), ts)
    return graph_components(every, component_labels(every, ts)[1])
