"""An index graph with the index's synonym edges (graph_synonym, HippoRAG 2) added among its
entity nodes, built once per run."""

from __future__ import annotations

import numpy as np

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.retrieve.context import QueryContext

SYNONYMS = "graph_synonym"


def with_synonyms(ctx: QueryContext, name: str) -> CSRGraph:
    """Graph `name` (one with an "entity" part) plus a synonym edge, weighted by its cosine,
    between every pair of entities graph_synonym joins; the graph itself where the index has no
    synonym edges."""
    if not ctx.index.has(SYNONYMS):
        return ctx.graph(name)
    return ctx.memo(("with_synonyms", name), lambda: _merged(ctx, name))


def _merged(ctx: QueryContext, name: str) -> CSRGraph:
    e0 = ctx.graph_parts(name)["entity"][0]
    base = ctx.index.table(name).to_pydict()
    syn = ctx.index.table(SYNONYMS).to_pydict()
    src = np.concatenate([np.asarray(base["src"]), e0 + np.asarray(syn["src"], np.int64)])
    dst = np.concatenate([np.asarray(base["dst"]), e0 + np.asarray(syn["dst"], np.int64)])
    weight = np.concatenate([base["weight"], syn["weight"]]).astype(np.float64)
    return CSRGraph.from_edges(src, dst, weight, n_nodes=ctx.graph(name).n_nodes, directed=False)
