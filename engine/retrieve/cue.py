"""Batch operators over Clue-RAG's chunk-unit-entity graph: adjacency as CSR arrays, candidate
gathering for a whole batch, and segmented (per-query) top-k of flat score arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.retrieve.context import QueryContext

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


def _csr(rows: np.ndarray, cols: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((cols, rows))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, rows + 1, 1)
    return np.cumsum(indptr), cols[order].astype(np.int64)


def cue_adjacency(ctx: QueryContext) -> CueAdjacency:
    """Adjacency of the index's chunk-unit-entity graph (cached on the context)."""
    if "_cue" in vars(ctx):
        return vars(ctx)["_cue"]
    parts = ctx.graph_parts(GRAPH)
    c0, u0, e0 = parts["chunk"][0], parts["unit"][0], parts["entity"][0]
    n_u, n_e = parts["unit"][1] - u0, parts["entity"][1] - e0
    edges = ctx.index.table(GRAPH).to_pydict()
    src, dst = np.asarray(edges["src"]), np.asarray(edges["dst"])
    is_cu = dst < e0  # chunk -> unit edges come first in the table; unit -> entity the rest
    unit_chunk = np.full(n_u, -1, dtype=np.int64)
    unit_chunk[dst[is_cu] - u0] = src[is_cu] - c0
    u, e = src[~is_cu] - u0, dst[~is_cu] - e0
    ent_indptr, ent_units = _csr(e, u, n_e)
    unit_indptr, unit_ents = _csr(u, e, n_u)
    adj = CueAdjacency(ent_indptr, ent_units, unit_indptr, unit_ents, unit_chunk)
    vars(ctx)["_cue"] = adj
    return adj


def segment_topk(owner: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k best scores of every owner in flat arrays (owner-sorted output,
    best first within an owner)."""
    if owner.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-scores, owner))
    o = owner[order]
    starts = np.searchsorted(o, o, side="left")
    rank = np.arange(o.size) - starts
    return order[rank < k]


def rowwise_dot(
    queries: np.ndarray, owner: np.ndarray, vectors: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """Scores of every flat (query, row) pair in one gather-multiply-sum: the batch's
    similarity kernel call for one depth."""
    if owner.size == 0:
        return np.zeros(0, dtype=np.float32)
    return np.einsum("ij,ij->i", queries[owner], np.asarray(vectors[rows], dtype=np.float32))
