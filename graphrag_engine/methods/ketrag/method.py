"""KET-RAG (Huang, Zhang and Xiao, KDD 2025): GraphRAG's local search on a skeleton of core
chunks, beside a keyword channel over every chunk (the index: graphrag_engine/index/skeleton.py,
built with `skeleton.enabled: true`).

Retrieval, for a batch of questions:

1. Embed the questions (one call); score every chunk and every keyword by one product per
   block of questions.
2. Keyword channel: the `top_words` nearest keywords (inner product with each word's mean
   sentence vector); walk them in order, taking each word's chunks by cosine to the question,
   until the chunks met would pass twice the channel's budget, (1 - theta) x max_tokens; the
   chunks by cosine, packed into that budget, are the context's `Text` section.
3. Skeleton channel: the `top_k_entities` entities nearest the question among those the core
   chunks name; their relationships that the core chunks hold (GraphRAG's order, at most
   `top_k_relationships` per entity) and their core chunks; GraphRAG's local context of them
   in what the keyword channel left of max_tokens.
4. The context is the skeleton's sections, then the keyword channel's. The chunk ranking (for
   Recall@k) is the keyword channel's chunks, then the skeleton's text units.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.ketrag.config import KETRAGConfig
from graphrag_engine.methods.ketrag.keywords import keyword_chunks, load_keywords, nearest_words
from graphrag_engine.methods.needs import Part
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import (
    EntityGraph,
    by_similarity,
    chunks_by_entities,
    entity_graph,
)
from graphrag_engine.retrieve.lines import budgeted_section, chunk_lines
from graphrag_engine.retrieve.local_search import local_context, relationships
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.types import Context, Retrieved, StageClock


@dataclass
class Skeleton:
    """The entity graph as far as the core chunks reach."""

    core: np.ndarray
    """Per chunk: whether it is a core chunk."""
    entities: np.ndarray
    """The entities a core chunk names (rows of the entity graph)."""
    entity_vectors: np.ndarray
    """Their vectors, normalised, in the same order."""
    relations: np.ndarray
    """Per relation: whether a core chunk holds it."""
    rank: np.ndarray
    """Per relation: the sum of its ends' degrees counting the skeleton's relations only."""


def load_skeleton(ctx: QueryContext, g: EntityGraph) -> Skeleton:
    """The core chunks of the `skeleton` table and the entities and relations they hold."""
    core = ctx.index.table("skeleton", ["core"]).column("core").to_numpy(zero_copy_only=False)
    entities = np.flatnonzero([core[c].any() for c in g.entity_chunks])
    relations = np.asarray([bool(core[c].any()) for c in g.relation_chunks], dtype=bool)
    n = len(g.names)
    degree = np.bincount(g.src[relations], minlength=n) + np.bincount(g.dst[relations], minlength=n)
    vectors = l2_normalize(np.asarray(ctx.entity_vectors, dtype=np.float32)[entities])
    return Skeleton(core, entities, vectors, relations, degree[g.src] + degree[g.dst])


def skeleton_entities(skel: Skeleton, qvec: np.ndarray, k: int) -> list[list[int]]:
    """Each question's k skeleton entities of the largest cosine (rounded to 1e-5, then the
    lower row first, as the shared entity search ranks)."""
    k = min(k, len(skel.entities))
    if k == 0:
        return [[] for _ in qvec]
    out = []
    for s in np.round(qvec @ skel.entity_vectors.T, 5):
        order = np.lexsort((skel.entities, -s))[:k]
        out.append(skel.entities[order].tolist())
    return out


def skeleton_channel(
    ctx: QueryContext,
    cfg: KETRAGConfig,
    skel: Skeleton,
    ents: list[int],
    qvec: np.ndarray,
    total: float,
) -> tuple[Context, list[int], dict]:
    """GraphRAG's local context of one question's skeleton entities in `total` tokens; its
    text units (core chunks only)."""
    g = entity_graph(ctx)
    cap = cfg.top_k_relationships * max(len(ents), 1)
    rels = relationships(g, ents, cap, keep=skel.relations, rank=skel.rank)
    chunks = [c for c in chunks_by_entities(g, ents) if skel.core[c]]
    if cfg.text_unit_order == "vector":
        chunks = by_similarity(ctx, qvec, chunks)
    context, extra = local_context(ctx, cfg, ents, chunks, rels=rels, total=total)
    return context, chunks, extra


@register(
    "ketrag",
    config=KETRAGConfig,
    paper="KET-RAG (Huang, Zhang and Xiao, KDD 2025): skeleton local search and keyword channel",
    needs={
        Part.CHUNKS,
        Part.CHUNK_VECTORS,
        Part.ENTITY_GRAPH,
        Part.ENTITY_VECTORS,
        Part.SKELETON,
    },
)
def ketrag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Both channels for every question of the batch."""
    cfg: KETRAGConfig = ctx.cfg.options
    total = ctx.scaled(cfg.max_tokens)
    text_budget = int(total * (1.0 - cfg.theta))
    with clock.stage("embed_queries"):
        qvec = l2_normalize(np.asarray(ctx.encode_queries([q.question for q in questions])))
    g = entity_graph(ctx)
    skel = ctx.memo("ketrag_skeleton", lambda: load_skeleton(ctx, g))
    index = ctx.memo("ketrag_keywords", lambda: load_keywords(ctx))
    with clock.stage("keyword_channel"):
        chunk_vectors = np.asarray(ctx.chunk_vectors, dtype=np.float32)
        texts = [[] for _ in questions]
        if text_budget > 0:
            for q, words in enumerate(nearest_words(index, qvec, cfg.top_words)):
                texts[q] = keyword_chunks(index, words, chunk_vectors @ qvec[q], text_budget)
        sections = [
            budgeted_section(ctx, chunk_lines(ctx, rows), text_budget, "-----Text-----")
            for rows in texts
        ]
    with clock.stage("skeleton_channel"):
        picked = skeleton_entities(skel, qvec, cfg.top_k_entities) if cfg.theta > 0 else None
        contexts, orders, extras = [], [], []
        for q, text in enumerate(sections):
            used = sum(text.counts or []) if text is not None else 0
            if picked is None:
                context, units, extra = Context(), [], {"entities": []}
            else:
                context, units, extra = skeleton_channel(
                    ctx, cfg, skel, picked[q], qvec[q], total - used
                )
            if text is not None:  # the keyword channel's text after the skeleton's sections
                context = dataclasses.replace(context, sections=[*context.sections, text])
            contexts.append(context)
            orders.append(list(dict.fromkeys(texts[q] + units)))
            extras.append({**extra, "keyword_chunks": len(text.items) if text else 0})
    depth = 2 * ctx.cfg.retrieval.candidates
    return Retrieved(
        from_orders(orders, depth), extras, [{} for _ in questions], clock.seconds, contexts
    )
