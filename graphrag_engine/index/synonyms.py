"""Synonym edges (HippoRAG 2): entities whose name vectors lie within a cosine of each other
are joined, so that "J. R. R. Tolkien" and "Tolkien" share what either of them touches.

Each entity's `top_k` nearest names are found in one batched call: the exact blocked top-k
kernel below ANN_FROM entities, an HNSW index above it (graphrag_engine/kernels/ann.py); no
pair is compared in Python. Names, not the entities' embedded descriptions, are compared: two
entities described by the same sentence are alike without being the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphrag_engine.index.build import Build, Stage
from graphrag_engine.index.graphs import edge_table
from graphrag_engine.kernels.ann import AnnIndex, AnnParams
from graphrag_engine.kernels.similarity import cosine_topk, l2_normalize
from graphrag_engine.progress import progress

ANN_FROM = 200_000
"""Entities from which the nearest names are searched approximately (HNSW)."""


def synonym_edges(
    vectors: np.ndarray,
    threshold: float,
    top_k: int,
    on_rows: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, cosine) of every pair of rows, src < dst, where one is among the other's
    `top_k` nearest rows with a cosine of at least `threshold`; `on_rows` hears how many rows
    each step of the exact search finished."""
    n = len(vectors)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    if n < 2:
        return empty
    unit = l2_normalize(vectors)
    k = min(top_k + 1, n)  # each row finds itself first
    if n >= ANN_FROM:
        scores, ids = AnnIndex.build(unit, AnnParams("hnsw")).search(unit, k, normalized=True)
    else:
        scores, ids = cosine_topk(unit, unit, k, normalized=True, on_block=on_rows)
    rows = np.repeat(np.arange(n, dtype=np.int64), k)
    ids, scores = ids.ravel().astype(np.int64), scores.ravel()
    keep = (ids >= 0) & (ids != rows) & (scores >= threshold)
    a, b, s = np.minimum(rows, ids)[keep], np.maximum(rows, ids)[keep], scores[keep]
    if a.size == 0:
        return empty
    code, first = np.unique(a * n + b, return_index=True)
    return code // n, code % n, s[first].astype(np.float32)


def _synonyms(b: Build) -> dict[str, Any]:
    """Synonym edges between entities whose names embed close together (graph_synonym)."""
    g = b.config.graph
    names = [e["name"] for e in b.entities]
    vectors = b.cache.encode(b.embedder, names, "entity names")
    with progress("synonyms: nearest names", total=len(names), unit="name") as bar:
        src, dst, cosine = synonym_edges(
            vectors, g.synonym_threshold, g.synonym_top_k, on_rows=bar.update
        )
    b.writer.write_table("graph_synonym", edge_table(src, dst, cosine))
    n = len(names)
    b.stats["graphs"]["graph_synonym"] = {
        "nodes": n,
        "directed": False,
        "parts": {"entity": [0, n]},
        "edges": int(src.size),
    }
    return {"items": n, "edges": int(src.size)}


BUILD_SYNONYMS = Stage(
    "synonyms",
    ("entities",),
    ("graph_synonym",),
    _synonyms,
    enabled=lambda cfg: cfg.graph.embed and cfg.graph.synonym_threshold <= 1.0,
)
