"""The index's entity graph as LightRAG and Microsoft GraphRAG read it: entities with their
type, description, degree and source chunks; relations with their ends, description, keywords,
weight, rank (the sum of their ends' degrees) and source chunks; and the operators their query
modes share, each over a whole batch: vector search of entities or relations and the relations
and chunks of a set of entities (cutting their lines to a budget is in `lines.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from graphrag_engine.kernels.segments import csr_from_pairs
from graphrag_engine.names import entity_line, relation_line
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.vector_search import nearest


@dataclass
class EntityGraph:
    """Entities and relations of an index in row order, with their chunk rows."""

    names: list[str]
    types: list[str]
    descriptions: list[str]
    src: np.ndarray
    dst: np.ndarray
    rel_descriptions: list[str]
    rel_keywords: list[str]
    weight: np.ndarray
    entity_chunks: list[np.ndarray]
    relation_chunks: list[np.ndarray]
    rel_indptr: np.ndarray
    rel_ids: np.ndarray
    """entity -> its relation rows (CSR)."""
    _chunk_order: dict[int, list[int]] = field(default_factory=dict, repr=False)

    @cached_property
    def degree(self) -> np.ndarray:
        """Relations per entity."""
        return np.diff(self.rel_indptr)

    @cached_property
    def rank(self) -> np.ndarray:
        """LightRAG's edge degree: the sum of a relation's ends' degrees."""
        return self.degree[self.src] + self.degree[self.dst]

    def relations_of(self, entity: int) -> np.ndarray:
        """Relation rows touching `entity`."""
        return self.rel_ids[self.rel_indptr[entity] : self.rel_indptr[entity + 1]]

    def entity_line(self, e: int) -> str:
        """An entity as a context line: name, type and description."""
        return entity_line(self.names[e], self.types[e], self.descriptions[e])

    def chunks_by_support(self, e: int) -> list[int]:
        """`e`'s chunks, those more of its relations come from first (ties in stored order);
        the same for every question, so kept once computed."""
        order = self._chunk_order.get(e)
        if order is None:
            support: dict[int, int] = {}
            for r in self.relations_of(e).tolist():
                for c in self.relation_chunks[r].tolist():
                    support[c] = support.get(c, 0) + 1
            order = sorted(self.entity_chunks[e].tolist(), key=lambda c: -support.get(c, 0))
            self._chunk_order[e] = order
        return order

    def relation_line(self, r: int) -> str:
        """A relation as a context line: its ends, description and keywords."""
        names, src, dst = self.names, self.src[r], self.dst[r]
        return relation_line(names[src], names[dst], self.rel_descriptions[r], self.rel_keywords[r])


def entity_graph(ctx: QueryContext) -> EntityGraph:
    """The index's entity graph (built once per run)."""
    return ctx.memo("entity_graph", lambda: _build(ctx))


def _build(ctx: QueryContext) -> EntityGraph:
    ents = ctx.index.table("entities", ["entity_id", "type", "description", "chunk_ids"])
    ents = ents.to_pydict()
    rels = ctx.index.table(
        "relations", ["src", "dst", "description", "keywords", "weight", "chunk_ids"]
    ).to_pydict()
    row = {e: i for i, e in enumerate(ents["entity_id"])}
    chunk_row = {c: i for i, c in enumerate(ctx.chunks["ids"])}

    def rows(ids: list[str]) -> np.ndarray:
        return np.asarray([chunk_row[c] for c in ids if c in chunk_row], dtype=np.int64)

    src = np.asarray([row[s] for s in rels["src"]], dtype=np.int64)
    dst = np.asarray([row[d] for d in rels["dst"]], dtype=np.int64)
    n = len(ents["entity_id"])
    ends = np.concatenate([src, dst])
    rel_rows = np.concatenate([np.arange(src.size), np.arange(src.size)])
    loops = np.concatenate([np.zeros(src.size, bool), src == dst])  # a self-loop counts once
    indptr, rel_ids = csr_from_pairs(ends[~loops], rel_rows[~loops], n)
    return EntityGraph(
        names=list(ctx.entities["name"]),
        types=[t or "" for t in ents["type"]],
        descriptions=[d or "" for d in ents["description"]],
        src=src,
        dst=dst,
        rel_descriptions=[d or "" for d in rels["description"]],
        rel_keywords=[k or "" for k in rels["keywords"]],
        weight=np.asarray(rels["weight"], dtype=np.float64),
        entity_chunks=[rows(c) for c in ents["chunk_ids"]],
        relation_chunks=[rows(c) for c in rels["chunk_ids"]],
        rel_indptr=indptr,
        rel_ids=rel_ids,
    )


TIE_MARGIN = 16
"""Extra neighbours fetched so that near-ties at the k-th place are ranked like the rest."""


def search(
    ctx: QueryContext,
    texts: list[str],
    table: str,
    k: int,
    vectors: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(B, k) rows and cosines of the rows of vector table `table` nearest each text: one
    embedding call (none when the texts' `vectors` are given) and one vector-search call for
    the batch (an empty text finds nothing)."""
    b = len(texts)
    ids = np.full((b, k), -1, dtype=np.int64)
    scores = np.zeros((b, k), dtype=np.float32)
    asked = [i for i, t in enumerate(texts) if t.strip()]
    rows = len(ctx.vectors(table)) if asked else 0
    if rows == 0:
        return ids, scores
    wide = min(k + TIE_MARGIN, rows)
    asked_vectors = (
        ctx.encode_queries([texts[i] for i in asked]) if vectors is None else vectors[asked]
    )
    s, found = nearest(ctx, table, asked_vectors, wide)
    # equal texts (entities of the same name) have equal vectors, but a text encoded alone or
    # in a padded batch gets cosines that differ in the 7th digit: rank by cosine rounded to
    # 1e-5, then by id, so a question's neighbours never depend on its batch
    for row, (rs, rf) in enumerate(zip(s, found, strict=True)):
        rs, rf = rs[rf >= 0], rf[rf >= 0]  # an ANN search may find fewer than asked
        order = np.lexsort((rf, -np.round(rs, 5)))[:k]
        n = len(order)
        ids[asked[row], :n], scores[asked[row], :n] = rf[order], rs[order]
    return ids, scores


def chunks_by_entities(g: EntityGraph, entities: list[int]) -> list[int]:
    """The chunks of `entities`, in entity order; within an entity, the chunks more of its
    relations come from first (GraphRAG's text-unit order; LightRAG's counts neighbours)."""
    return list(dict.fromkeys(c for e in entities for c in g.chunks_by_support(e)))


def by_similarity(ctx: QueryContext, question_vector: np.ndarray, chunks: list[int]) -> list[int]:
    """`chunks` ordered by the cosine of their vectors to the question's, highest first, ties
    in the given order (LightRAG's VECTOR pick of the chunks behind entities or relations)."""
    if len(chunks) < 2:
        return list(chunks)
    rows = np.asarray(chunks, dtype=np.int64)
    q = np.asarray(question_vector, dtype=np.float32)
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    scores = np.round(np.asarray(ctx.chunk_vectors[rows], dtype=np.float32) @ q, 5)
    return rows[np.argsort(-scores, kind="stable")].tolist()
