"""Triple graphs of a batch: the per-question graphs of a KBQA batch, per-question subgraphs cut
from an index's entity graph, or that whole graph shared by every question. A batch's graphs are
held as one graph whose questions' parts are disjoint blocks, so that each graph kernel (PPR,
random walks, shortest paths) runs once for the whole batch; `PathText` renders paths over it.

Used by LEGO-GraphRAG's modules and by any method that cuts, joins or walks subgraphs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy import sparse

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.paths import shortest_path_levels
from graphrag_engine.kernels.segments import csr_gather, csr_order, group_by_owner
from graphrag_engine.retrieve.lines import Lines


def picked(items: Sequence[str], rows: np.ndarray) -> Lines:
    """`items[rows[i]]` as line i, read when it is asked for: a cut graph's node names and
    triple relations, without a string list as long as the batch's subgraphs (a pick of a pick
    reads the first list directly)."""
    if isinstance(items, Lines) and isinstance(items.rows, np.ndarray):
        return Lines(items.rows[rows], items.render)
    return Lines(rows, items.__getitem__)


def names_of(tg: TripleGraph, nodes: np.ndarray | list[int]) -> list[str]:
    """The names of nodes of a triple graph, in their order (a cut graph's in one gather: SE
    names a couple of thousand nodes a question)."""
    if isinstance(tg, InducedCut):
        return tg.source.name_array[tg.origin[np.asarray(nodes, dtype=np.int64)]].tolist()
    if isinstance(tg.names, Lines):
        return tg.names.take(nodes)
    return [tg.names[n] for n in nodes]


@dataclass
class TripleGraph:
    """Named nodes and (head, relation, tail) triples; `node_owner` / `edge_owner` give the
    question a node or triple belongs to (-1: shared by every question, an index graph)."""

    names: Sequence[str]
    node_owner: np.ndarray
    heads: np.ndarray
    tails: np.ndarray
    relations: Sequence[str]
    edge_owner: np.ndarray
    origin: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Node id in the graph this one was cut from (identity for a source graph)."""

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return len(self.names)

    @cached_property
    def graph(self) -> CSRGraph:
        """Undirected CSR view; every entry's edge id is its triple's row."""
        return CSRGraph.from_edges(self.heads, self.tails, n_nodes=self.n_nodes, directed=False)

    @cached_property
    def name_array(self) -> np.ndarray:
        """The node names as an object array, to gather thousands at once (a cut's SE nodes)."""
        out = np.empty(self.n_nodes, dtype=object)
        out[:] = list(self.names)
        return out

    @cached_property
    def adjacency(self) -> sparse.csr_array:
        """Undirected structure alone (no weights, no triple rows; parallel triples one entry),
        for walks that read only each node's neighbours: scipy's compiled conversion builds it
        at a fraction of the cost of `graph` on a batch's subgraphs."""
        ends = np.concatenate([self.heads, self.tails]), np.concatenate([self.tails, self.heads])
        ones = np.ones(ends[0].size, dtype=np.int32)
        return sparse.csr_array((ones, ends), shape=(self.n_nodes, self.n_nodes))

    def edge_counts(self, n_q: int) -> np.ndarray:
        """How many triples each question's block holds."""
        return np.bincount(self.edge_owner, minlength=n_q)

    def shortest_paths(self, row: int, max_hops: int, cap: int) -> list[tuple[int, ...]]:
        """Every shortest path from node `row` within `max_hops`, up to `cap`, shortest first."""
        return [tuple(p) for level in self.path_levels(row, max_hops, cap) for p in level.tolist()]

    def path_levels(self, row: int, max_hops: int, cap: int) -> list[np.ndarray]:
        """`shortest_paths` as one array per length, a path a row."""
        return shortest_path_levels(self.adjacency, row, max_hops, cap)

    def nodes_by_question(self, n_q: int) -> list[np.ndarray]:
        """Node ids of each question's block (ascending)."""
        return group_by_owner(self.node_owner, n_q)

    def edges_by_question(self, n_q: int) -> list[np.ndarray]:
        """Triple rows each question may use: its block's, or all of a shared graph's."""
        if self.edge_owner.size and self.edge_owner.min() < 0:
            return [np.arange(self.heads.size)] * n_q
        return group_by_owner(self.edge_owner, n_q)

    @cached_property
    def _edges_by_head(self) -> tuple[np.ndarray, np.ndarray]:
        """(indptr, triple rows) grouping the triples by head node, rows ascending per head."""
        return csr_order(self.heads, np.arange(self.heads.size), self.n_nodes)

    def induced_edges(self, nodes: np.ndarray, member: np.ndarray) -> np.ndarray:
        """Rows (ascending) of the triples whose two ends are in `nodes`; `member` is a boolean
        array over this graph's nodes, True exactly at `nodes`. Reads only the nodes' own
        triples, so a question's cost follows its subgraph, not the whole graph."""
        return np.sort(self._rows_among(nodes, member))

    def _rows_among(self, nodes: np.ndarray, member: np.ndarray) -> np.ndarray:
        """`induced_edges` in the order the nodes' own triples are read (unsorted)."""
        indptr, order = self._edges_by_head
        rows = order[csr_gather(indptr, nodes)[1]]
        return rows[member[self.tails[rows]]]

    def subgraphs(self, nodes: list[np.ndarray], edges: list[np.ndarray]) -> TripleGraph:
        """Question q's `nodes[q]` and `edges[q]` (rows of this graph) as disjoint blocks of a
        new graph; an edge whose ends are not both kept is dropped."""
        owners, origin, heads, tails, rows, e_owner = [], [], [], [], [], []
        position = np.full(self.n_nodes, -1, np.int64)  # node -> its row in the new graph
        placed = 0
        for q, (ns, es) in enumerate(zip(nodes, edges, strict=True)):
            ns, es = np.asarray(ns, np.int64), np.asarray(es, np.int64)
            position[ns] = placed + np.arange(ns.size)
            placed += ns.size
            h, t = position[self.heads[es]], position[self.tails[es]]
            keep = (h >= 0) & (t >= 0)
            heads.append(h[keep])
            tails.append(t[keep])
            rows.append(es[keep])
            e_owner.append(np.full(int(keep.sum()), q, np.int64))
            owners.append(np.full(ns.size, q, np.int64))
            origin.append(ns)
            position[ns] = -1
        joined = [
            np.concatenate(parts) if parts else np.zeros(0, np.int64)
            for parts in (owners, heads, tails, rows, e_owner, origin)
        ]
        owner, head, tail, row, edge_owner, node_origin = joined
        names = picked(self.names, node_origin)
        return TripleGraph(
            names, owner, head, tail, picked(self.relations, row), edge_owner, node_origin
        )


class InducedCut(TripleGraph):
    """Question q's `nodes[q]` of a shared graph (each block ascending, as `np.unique` gives
    them) as block q, with every triple of that graph between two of them: what SE keeps
    without a scorer. The triples are gathered only when a module asks for them (complete
    paths, beam search); shortest paths walk the source's own adjacency within each block and
    paths render through the source's triples, so a question's cost follows the part of its
    block a module reads, not the block's size (SE keeps up to 2,000 nodes a question)."""

    def __init__(self, source: TripleGraph, nodes: list[np.ndarray]) -> None:
        """The blocks of `nodes` (rows of `source`); nothing is gathered yet."""
        nodes = [np.asarray(ns, np.int64) for ns in nodes]
        if any(ns.size > 1 and np.any(np.diff(ns) <= 0) for ns in nodes):
            raise ValueError("InducedCut needs each block's nodes ascending and distinct")
        self.source = source
        self.blocks = nodes
        sizes = [ns.size for ns in nodes]
        self.bounds = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.origin = np.concatenate(nodes) if nodes else np.zeros(0, np.int64)
        self.node_owner = np.repeat(np.arange(len(nodes), dtype=np.int64), sizes)
        self.names = picked(source.names, self.origin)
        self._member = np.zeros(source.n_nodes, dtype=bool)  # scratch, False between calls

    @cached_property
    def _triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(heads, tails, source rows, owner) of every block's triples, block after block,
        source rows ascending within a block: what `subgraphs` gives for the induced rows."""
        parts = []
        for q, ns in enumerate(self.blocks):
            self._member[ns] = True
            rows = self.source.induced_edges(ns, self._member)
            self._member[ns] = False
            at = self.bounds[q] + np.searchsorted(
                ns, [self.source.heads[rows], self.source.tails[rows]]
            )
            parts.append((at[0], at[1], rows, np.full(rows.size, q, np.int64)))
        if not parts:
            return tuple(np.zeros(0, np.int64) for _ in range(4))
        return tuple(np.concatenate(p) for p in zip(*parts, strict=True))

    heads = property(lambda self: self._triples[0])
    tails = property(lambda self: self._triples[1])
    edge_owner = property(lambda self: self._triples[3])

    @property
    def relations(self) -> Lines:
        """Each triple's relation, read from the source when asked for."""
        return picked(self.source.relations, self._triples[2])

    def edge_counts(self, n_q: int) -> np.ndarray:
        """How many triples each block holds, counted without gathering them."""
        if "_triples" in self.__dict__:
            return super().edge_counts(n_q)
        counts = np.zeros(n_q, np.int64)
        for q, ns in enumerate(self.blocks):
            self._member[ns] = True
            counts[q] = self.source._rows_among(ns, self._member).size
            self._member[ns] = False
        return counts

    def path_levels(self, row: int, max_hops: int, cap: int) -> list[np.ndarray]:
        """Every shortest path from node `row` within its block, one array per length: walked
        on the source's adjacency inside the block's nodes and numbered back into the block
        (the numbering keeps the source's order, so the paths come in the same order and cap)."""
        q = int(self.node_owner[row])
        lo, ns = int(self.bounds[q]), self.blocks[q]
        self._member[ns] = True
        try:
            levels = shortest_path_levels(
                self.source.adjacency, int(self.origin[row]), max_hops, cap, within=self._member
            )
        finally:
            self._member[ns] = False
        return [lo + np.searchsorted(ns, level) for level in levels]


def question_graphs(triples: list[list[list[str]]]) -> TripleGraph:
    """The KBQA graphs of a batch (one list of [head, relation, tail] per question) as blocks."""
    names: list[str] = []
    owners, heads, tails, rels, e_owner = [], [], [], [], []
    for q, tri in enumerate(triples):
        local: dict[str, int] = {}
        for h, r, t in tri:
            for name in (h, t):
                if name not in local:
                    local[name] = len(names)
                    names.append(name)
                    owners.append(q)
            heads.append(local[h])
            tails.append(local[t])
            rels.append(r)
            e_owner.append(q)
    n = len(names)
    return TripleGraph(
        names,
        np.asarray(owners, np.int64),
        np.asarray(heads, np.int64),
        np.asarray(tails, np.int64),
        rels,
        np.asarray(e_owner, np.int64),
        np.arange(n, dtype=np.int64),
    )


def index_graph(ctx) -> TripleGraph:
    """The index's entity graph: entities as nodes, each relation a triple labelled with its
    description, or its keywords and the title of a passage it comes from."""
    ents = ctx.entities
    row = {e: i for i, e in enumerate(ents["entity_id"])}
    rel = ctx.index.table(
        "relations", ["src", "dst", "description", "keywords", "chunk_ids"]
    ).to_pydict()
    chunk_title = dict(zip(ctx.chunks["ids"], ctx.chunks["title"], strict=True))
    labels = []
    for desc, kw, cids in zip(rel["description"], rel["keywords"], rel["chunk_ids"], strict=True):
        if desc:
            labels.append(desc)
        else:
            title = next((chunk_title[c] for c in cids if chunk_title.get(c)), "")
            labels.append(f"{kw or 'related'} in {title}" if title else (kw or "related"))
    n = len(ents["name"])
    return TripleGraph(
        list(ents["name"]),
        np.full(n, -1, np.int64),
        np.asarray([row[s] for s in rel["src"]], np.int64),
        np.asarray([row[d] for d in rel["dst"]], np.int64),
        labels,
        np.full(len(labels), -1, np.int64),
        np.arange(n, dtype=np.int64),
    )


def _norm(text: str) -> str:
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def topic_entities_by_name(tg: TripleGraph, questions: list[str], encode) -> list[list[int]]:
    """Topic entities of per-question graphs: the question's nodes whose name occurs in it as
    whole words (longest names first, a name inside a longer match skipped), else the node whose
    name embeds closest to the question (one embedding call for every name of the batch)."""
    out: list[list[int]] = []
    missing: list[int] = []
    groups = tg.nodes_by_question(len(questions))
    for q, text in enumerate(questions):
        qn = _norm(text)
        nodes = groups[q]
        found: list[int] = []
        taken: list[str] = []
        for n in sorted(nodes, key=lambda n: -len(tg.names[n])):
            name = _norm(tg.names[n])
            if len(name) > 3 and name in qn and not any(name in t for t in taken):
                found.append(int(n))
                taken.append(name)
        out.append(found)
        if not found and nodes.size:
            missing.append(q)
    if missing:
        qvec = encode([questions[q] for q in missing])
        nvec = encode([tg.names[n] for q in missing for n in groups[q]])
        start = 0
        for row, q in enumerate(missing):
            g = groups[q]
            sims = nvec[start : start + g.size] @ qvec[row]
            out[q] = [int(g[int(np.argmax(sims))])]
            start += g.size
    return out


def pretty_relation(rel: str) -> str:
    """A relation as words for scoring: Freebase's `a.b.c_d` becomes `a b c d`."""
    return rel.replace(".", " ").replace("_", " ")
