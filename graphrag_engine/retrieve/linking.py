"""Query entity linking: named entities of every query matched to graph entities, by name
where a mention names an entity exactly, else by embedding; or the query matched to the
relations whose text is nearest it, and their ends linked (`link_facts`).

One NER pass over all queries, one embedding call for all mentions, one similarity kernel call
against the entity vectors; no per-query model calls. The exact name comes first because entity
vectors may embed descriptions as well as names: "Port Calloway" then embeds nearer an entity
described by one short sentence about it than the entity Port Calloway with its long one. Names
match under the key entity resolution merges surface forms by (`names.normalize_name`).
"""

from __future__ import annotations

import numpy as np

from graphrag_engine.models.ner import skip_labels
from graphrag_engine.names import normalize_name
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph, search
from graphrag_engine.retrieve.vector_search import nearest

MENTIONS_KEPT = 1 << 16
"""Query texts whose mentions a run keeps, so that a method's later step (or another method
of the same run) does not tag a question again."""


def query_mentions(ctx: QueryContext, queries: list[str]) -> list[list[str]]:
    """Entity mentions of every query (spaCy NER, or the rule fallback), de-duplicated; each
    distinct query tagged once per run."""
    known: dict[str, list[str]] = ctx.memo("query_mentions", dict)
    missing = [q for q in dict.fromkeys(queries) if q not in known]
    if missing:
        if len(known) + len(missing) > MENTIONS_KEPT:
            known.clear()
        for q, ents in zip(
            missing, skip_labels(ctx.ner.extract(missing), ctx.ner_skip_labels), strict=True
        ):
            seen: list[str] = []
            for name, _ in ents:
                if name.lower() not in (s.lower() for s in seen):
                    seen.append(name)
            known[q] = seen
    return [list(known[q]) for q in queries]


def link_entities(
    ctx: QueryContext, queries: list[str], top_k: int = 1, threshold: float = 0.0
) -> tuple[list[dict[int, float]], list[list[str]]]:
    """Per query {entity row: best cosine} of the graph entities its mentions link to, and the
    mentions themselves; a query without mentions links nothing."""
    mentions = query_mentions(ctx, queries)
    flat = [m for ms in mentions for m in ms]
    if not flat or len(ctx.entities["entity_id"]) == 0:
        return [{} for _ in queries], mentions
    exact = _exact(ctx, flat)
    embedded = _embedded(exact, top_k)
    vectors = ctx.encode_queries([flat[i] for i in embedded]) if embedded else None
    return _link(ctx, mentions, exact, embedded, vectors, top_k, threshold), mentions


def link_and_embed(
    ctx: QueryContext, queries: list[str], top_k: int = 1, threshold: float = 0.0
) -> tuple[list[dict[int, float]], list[list[str]], np.ndarray]:
    """`link_entities` and the queries' own vectors, from one embedding call for the queries
    and their mentions together (a method that needs both sends the encoder one batch)."""
    mentions = query_mentions(ctx, queries)
    flat = [m for ms in mentions for m in ms]
    if len(ctx.entities["entity_id"]) == 0:
        flat = []
    exact = _exact(ctx, flat)
    embedded = _embedded(exact, top_k)
    # encode_queries, not encode_query_groups: an empty question keeps the encoder's vector of
    # "" (what dense retrieval gives it) rather than the zeros the groups give empty keys
    vectors = ctx.encode_queries([*queries, *(flat[i] for i in embedded)])
    if not flat:
        return [{} for _ in queries], mentions, vectors
    links = _link(ctx, mentions, exact, embedded, vectors[len(queries) :], top_k, threshold)
    return links, mentions, vectors[: len(queries)]


def _exact(ctx: QueryContext, flat: list[str]) -> list[int | None]:
    """Per mention, the entity row it names exactly (None when it names none)."""
    named = entities_by_name(ctx)
    return [(named.get(normalize_name(m)) or [None])[0] for m in flat]


def _embedded(exact: list[int | None], top_k: int) -> list[int]:
    """Positions of the mentions whose vectors the links read: every one, except, where a
    mention keeps one link, those that name an entity exactly (that entity is the link)."""
    if top_k > 1:
        return list(range(len(exact)))
    return [i for i, e in enumerate(exact) if e is None]


def _link(
    ctx: QueryContext,
    mentions: list[list[str]],
    exact: list[int | None],
    embedded: list[int],
    vectors: np.ndarray | None,
    top_k: int,
    threshold: float,
) -> list[dict[int, float]]:
    """Each query's links from its mentions: a mention's exact name first, then the entities
    nearest its vector (`vectors` row i is mention `embedded[i]`; one similarity call)."""
    links: list[dict[int, float]] = [{} for _ in mentions]
    near: dict[int, list[tuple[int, float]]] = {}
    if embedded:
        scores, ids = nearest(ctx, "entity_vectors", vectors, top_k)
        for m, row_ids, row_scores in zip(embedded, ids.tolist(), scores.tolist(), strict=True):
            near[m] = list(zip(row_ids, row_scores, strict=True))
    owner = np.repeat(np.arange(len(mentions)), [len(ms) for ms in mentions])
    for m, q in enumerate(owner.tolist()):
        pairs = near.get(m, [])
        if exact[m] is not None:  # the named entity, then the nearest others
            pairs = [(exact[m], 1.0), *[(e, s) for e, s in pairs if e != exact[m]]][:top_k]
        for e, s in pairs:
            if e >= 0 and s >= threshold:
                links[q][e] = max(links[q].get(e, -1.0), s)
    return links


def link_facts(
    ctx: QueryContext, queries: list[str], vectors: np.ndarray, top_k: int
) -> list[dict[int, float]]:
    """Per query {entity row: mean cosine of its linked facts}: the `top_k` relations nearest
    each query's vector (HippoRAG 2's query-to-triple link; one similarity call for the
    batch), each passing its cosine to both its ends."""
    g = entity_graph(ctx)
    links: list[dict[int, float]] = [{} for _ in queries]
    if g.src.size == 0 or not queries:
        return links
    ids, scores = search(ctx, queries, "relation_vectors", top_k, np.asarray(vectors))
    for q, (row_ids, row_scores) in enumerate(zip(ids, scores, strict=True)):
        total: dict[int, list[float]] = {}
        for r, s in zip(row_ids.tolist(), row_scores.tolist(), strict=True):
            if r >= 0:
                for e in {int(g.src[r]), int(g.dst[r])}:
                    total.setdefault(e, []).append(float(s))
        links[q] = {e: sum(v) / len(v) for e, v in total.items()}
    return links


def entities_by_name(ctx: QueryContext) -> dict[str, list[int]]:
    """Entity rows under each name key (`names.normalize_name`, the key entity resolution
    merges by), ascending; built once per run."""

    def build() -> dict[str, list[int]]:
        rows: dict[str, list[int]] = {}
        for e, name in enumerate(ctx.entities["name"]):
            rows.setdefault(normalize_name(name), []).append(e)
        return rows

    return ctx.memo("entities_by_name", build)
