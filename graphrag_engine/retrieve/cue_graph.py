"""Batch operators over the chunk-unit-entity graph (Clue-RAG's cue graph; LinearRAG's
entity-sentence-passage graph): adjacency as CSR arrays, candidate gathering for a whole batch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphrag_engine.kernels.segments import csr_from_pairs
from graphrag_engine.kernels.similarity import csr_row_topk
from graphrag_engine.retrieve.context import QueryContext

GRAPH = "graph_cue"


@dataclass
class CueAdjacency:
    """entity -> units and unit -> entities as CSR arrays, and each unit's chunk row."""

    ent_indptr: np.ndarray
    ent_units: np.ndarray
    unit_indptr: np.ndarray
    unit_ents: np.ndarray
    unit_chunk: np.ndarray

    def units_of(self, entities: np.ndarray) -> np.ndarray:
        """Distinct units mentioning any of `entities`."""
        if entities.size == 0:
            return np.zeros(0, dtype=np.int64)
        parts = [self.ent_units[self.ent_indptr[e] : self.ent_indptr[e + 1]] for e in entities]
        return np.unique(np.concatenate(parts))

    def entities_of(self, units: np.ndarray) -> np.ndarray:
        """Distinct entities mentioned by any of `units`."""
        if units.size == 0:
            return np.zeros(0, dtype=np.int64)
        parts = [self.unit_ents[self.unit_indptr[u] : self.unit_indptr[u + 1]] for u in units]
        return np.unique(np.concatenate(parts))

    def top_units(
        self,
        queries: np.ndarray,
        entities: list[int],
        exclude: list[tuple[int, ...]],
        vectors: np.ndarray,
        k: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat (item, unit, score) arrays of a beam step: for item i, the k units mentioning
        entity `entities[i]`, not in `exclude[i]` (the units already on its path), whose
        `vectors` are nearest `queries[i]` by dot product, best first (the lower unit on ties);
        all items in one compiled pass over their entities' unit lists."""
        return csr_row_topk(
            queries, np.asarray(entities, dtype=np.int64), self.ent_indptr, self.ent_units,
            vectors, k, exclude,
        )  # fmt: skip

    def chunks_of(self, unit_sets: list[set[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Flat (owner, chunk) arrays: the distinct chunks holding each owner's units."""
        owner_l, chunk_l = [], []
        for q, units in enumerate(unit_sets):
            units_q = sorted(units)
            chunks = np.unique(self.unit_chunk[units_q]) if units_q else np.zeros(0, np.int64)
            owner_l.append(np.full(chunks.size, q, dtype=np.int64))
            chunk_l.append(chunks.astype(np.int64))
        return np.concatenate(owner_l), np.concatenate(chunk_l)


def cue_adjacency(ctx: QueryContext) -> CueAdjacency:
    """Adjacency of the index's chunk-unit-entity graph (built once per run)."""
    return ctx.memo("cue_adjacency", lambda: _build_adjacency(ctx))


def _build_adjacency(ctx: QueryContext) -> CueAdjacency:
    parts = ctx.graph_parts(GRAPH)
    c0, u0, e0 = parts["chunk"][0], parts["unit"][0], parts["entity"][0]
    n_u, n_e = parts["unit"][1] - u0, parts["entity"][1] - e0
    edges = ctx.index.table(GRAPH).to_pydict()
    src, dst = np.asarray(edges["src"]), np.asarray(edges["dst"])
    is_cu = dst < e0  # chunk -> unit edges come first in the table; unit -> entity the rest
    unit_chunk = np.full(n_u, -1, dtype=np.int64)
    unit_chunk[dst[is_cu] - u0] = src[is_cu] - c0
    u, e = src[~is_cu] - u0, dst[~is_cu] - e0
    ent_indptr, ent_units = csr_from_pairs(e, u, n_e)
    unit_indptr, unit_ents = csr_from_pairs(u, e, n_u)
    return CueAdjacency(ent_indptr, ent_units, unit_indptr, unit_ents, unit_chunk)
