"""Query entity linking: named entities of every query matched to graph entities by embedding.

One NER pass over all queries, one embedding call for all mentions, one similarity kernel call
against the entity vectors; no per-query model calls.
"""

from __future__ import annotations

import numpy as np

from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.vector_search import nearest


def query_mentions(ctx: QueryContext, queries: list[str]) -> list[list[str]]:
    """Entity mentions of every query (spaCy NER, or the rule fallback), de-duplicated."""
    out = []
    for ents in ctx.ner.extract(queries):
        seen: list[str] = []
        for name, _ in ents:
            if name.lower() not in (s.lower() for s in seen):
                seen.append(name)
        out.append(seen)
    return out


def link_entities(
    ctx: QueryContext, queries: list[str], top_k: int = 1, threshold: float = 0.0
) -> tuple[list[dict[int, float]], list[list[str]]]:
    """Per query {entity row: best cosine} of the graph entities its mentions link to, and the
    mentions themselves; a query without mentions links nothing."""
    mentions = query_mentions(ctx, queries)
    flat = [m for ms in mentions for m in ms]
    links: list[dict[int, float]] = [{} for _ in queries]
    if not flat or len(ctx.entities["entity_id"]) == 0:
        return links, mentions
    vectors = ctx.encode_queries(flat)
    scores, ids = nearest(ctx, "entity_vectors", vectors, top_k)
    owner = np.repeat(np.arange(len(queries)), [len(ms) for ms in mentions])
    for q, row_ids, row_scores in zip(owner, ids, scores, strict=True):
        for e, s in zip(row_ids, row_scores, strict=True):
            if e >= 0 and s >= threshold:
                links[q][int(e)] = max(links[q].get(int(e), -1.0), float(s))
    return links, mentions
