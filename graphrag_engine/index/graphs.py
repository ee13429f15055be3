"""Graph edge tables written to the index (node ids are row positions in the tables):

* graph_entity: entity -> entity, one row per relation (undirected), weight = relation weight;
* graph_cue: Clue-RAG's multi-partite graph over chunks [0, C), units [C, C+U) and entities
  [C+U, C+U+E): chunk-unit and unit-entity edges;
* graph_passage_entity: HippoRAG-style chunks [0, C) and entities [C, C+E), weight = the
  number of the chunk's units that mention the entity.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphrag_engine.store.schemas import GRAPH_EDGES


def _positions(values: pa.ChunkedArray | pa.Array, of: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Row of each value in `of` (every value must be there)."""
    if isinstance(of, pa.ChunkedArray):
        of = of.combine_chunks()
    found = pc.index_in(values, value_set=of)
    if found.null_count:
        raise ValueError(f"{found.null_count} ids are not among the rows they refer to")
    return found.to_numpy(zero_copy_only=False).astype(np.int64)


def edge_table(
    src: np.ndarray | list, dst: np.ndarray | list, weight: np.ndarray | list
) -> pa.Table:
    """An edge table of the GRAPH_EDGES schema."""
    return pa.table(
        {
            "src": np.asarray(src, dtype=np.int64),
            "dst": np.asarray(dst, dtype=np.int64),
            "weight": np.asarray(weight, dtype=np.float32),
        },
        schema=GRAPH_EDGES,
    )


def build_graphs(
    chunk_ids: pa.Array,
    units: pa.Table,
    entities: list[dict],
    unit_entity: pa.Table,
    relations: list[dict],
) -> tuple[dict[str, pa.Table], dict[str, dict]]:
    """Edge tables of the three graphs and their node layouts (for the manifest); chunk ids,
    units (unit_id, chunk_id) and unit_entity are Arrow columns (ids looked up column-wise, no
    Python row per chunk or unit)."""
    e_idx = {e["entity_id"]: i for i, e in enumerate(entities)}
    n_c, n_u, n_e = len(chunk_ids), units.num_rows, len(entities)

    ent = edge_table(
        [e_idx[r["src"]] for r in relations],
        [e_idx[r["dst"]] for r in relations],
        [r["weight"] for r in relations],
    )

    unit_chunk = _positions(units["chunk_id"], chunk_ids)
    link_unit = _positions(unit_entity["unit_id"], units["unit_id"])
    link_entity = _positions(
        unit_entity["entity_id"], pa.array([e["entity_id"] for e in entities], pa.string())
    )
    cue = edge_table(
        np.concatenate([unit_chunk, n_c + link_unit]),
        np.concatenate([n_c + np.arange(n_u), n_c + n_u + link_entity]),
        np.ones(n_u + len(link_unit)),
    )

    pair_codes, counts = np.unique(
        unit_chunk[link_unit] * max(n_e, 1) + link_entity, return_counts=True
    )
    pe = edge_table(pair_codes // max(n_e, 1), n_c + pair_codes % max(n_e, 1), counts)

    layouts = {
        "graph_entity": {"nodes": n_e, "directed": False, "parts": {"entity": [0, n_e]}},
        "graph_cue": {
            "nodes": n_c + n_u + n_e,
            "directed": False,
            "parts": {
                "chunk": [0, n_c],
                "unit": [n_c, n_c + n_u],
                "entity": [n_c + n_u, n_c + n_u + n_e],
            },
        },
        "graph_passage_entity": {
            "nodes": n_c + n_e,
            "directed": False,
            "parts": {"chunk": [0, n_c], "entity": [n_c, n_c + n_e]},
        },
    }
    return {"graph_entity": ent, "graph_cue": cue, "graph_passage_entity": pe}, layouts
