"""Graph edge tables written to the index (node ids are row positions in the tables):

* graph_entity: entity -> entity, one row per relation (undirected), weight = relation weight;
* graph_cue: Clue-RAG's multi-partite graph over chunks [0, C), units [C, C+U) and entities
  [C+U, C+U+E): chunk-unit and unit-entity edges;
* graph_passage_entity: HippoRAG-style chunks [0, C) and entities [C, C+E), weight = the
  number of the chunk's units that mention the entity.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from engine.store.schemas import GRAPH_EDGES


def _table(src: list[int], dst: list[int], weight: list[float]) -> pa.Table:
    return pa.table(
        {
            "src": np.asarray(src, dtype=np.int64),
            "dst": np.asarray(dst, dtype=np.int64),
            "weight": np.asarray(weight, dtype=np.float32),
        },
        schema=GRAPH_EDGES,
    )


def build_graphs(
    chunk_ids: list[str],
    units: list[dict],
    entities: list[dict],
    unit_entity: list[dict],
    relations: list[dict],
) -> tuple[dict[str, pa.Table], dict[str, dict]]:
    """Edge tables of the three graphs and their node layouts (for the manifest)."""
    c_idx = {c: i for i, c in enumerate(chunk_ids)}
    u_idx = {u["unit_id"]: i for i, u in enumerate(units)}
    e_idx = {e["entity_id"]: i for i, e in enumerate(entities)}
    n_c, n_u, n_e = len(chunk_ids), len(units), len(entities)

    ent = _table(
        [e_idx[r["src"]] for r in relations],
        [e_idx[r["dst"]] for r in relations],
        [r["weight"] for r in relations],
    )

    cu_src = [c_idx[u["chunk_id"]] for u in units]
    cu_dst = [n_c + i for i in range(n_u)]
    ue_src = [n_c + u_idx[r["unit_id"]] for r in unit_entity]
    ue_dst = [n_c + n_u + e_idx[r["entity_id"]] for r in unit_entity]
    cue = _table(cu_src + ue_src, cu_dst + ue_dst, [1.0] * (len(cu_src) + len(ue_src)))

    unit_chunk = {u["unit_id"]: c_idx[u["chunk_id"]] for u in units}
    counts = Counter((unit_chunk[r["unit_id"]], e_idx[r["entity_id"]]) for r in unit_entity)
    pairs = sorted(counts)
    pe = _table(
        [c for c, _ in pairs], [n_c + e for _, e in pairs], [float(counts[p]) for p in pairs]
    )

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
