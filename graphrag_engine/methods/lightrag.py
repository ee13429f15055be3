"""LightRAG-style dual-level retrieval (Guo et al., 2024) over the shared entity graph.

For the whole batch at once:

1. Keywords: low-level (entities) and high-level (themes, relations) keys of every question,
   from one batched structured LLM call (`keywords: llm`) or, LLM-free, from NER
   (`keywords: ner`: the question's entities low, the question itself high).
2. Low level (`local`): the joined low-level keys -> entity vector search (top_k) -> those
   entities (by similarity), all their relations (by rank = the ends' degree sum, then
   weight) and the chunks they came from.
3. High level (`global`): the joined high-level keys -> relation vector search (top_k) -> those
   relations (by rank, then weight), their end entities and the relations' chunks.
   A level's chunks are ordered by their cosine to the question (`chunk_pick: vector`,
   LightRAG's default since its 1.4 code) or by entity, then by how many of its relations share
   the chunk (`weight`: the order of the paper's code).
4. `hybrid` merges both levels round-robin (entities, relations and chunks alike, duplicates
   dropped), as LightRAG does; `mix` adds the dense chunks of the question as a third list of
   the chunks' round-robin (dense, entity-linked, relation-linked).

The batch's low-level keys, high-level keys and (where used) questions are embedded in one
call; each search is then one similarity call for every question of the batch.
The context is three sections, entities, relations and sources, each cut to its own token
budget and kept whole by the answer stage; the sources are also the chunk ranking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import KEYED_GRAPH_SEARCH
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.dense import dense_search
from graphrag_engine.retrieve.entity_graph import (
    EntityGraph,
    by_similarity,
    chunks_by_entities,
    entity_graph,
    search,
)
from graphrag_engine.retrieve.keywords import llm_keywords, ner_keywords
from graphrag_engine.retrieve.lines import (
    budgeted_sections,
    chunk_lines,
    entity_lines,
    relation_lines,
)
from graphrag_engine.retrieve.ranking import from_orders, round_robin
from graphrag_engine.retrieve.types import Context, Retrieved, StageClock


@dataclass
class LightRAGConfig:
    """LightRAG's query modes; token budgets per section, LightRAG's defaults (4,000 each,
    shrunk in proportion when the answer window is smaller: graphrag_engine/retrieve/budget.py)."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "mode": "hybrid (the paper's runs)",
        "keywords": "llm (the paper)",
        "top_k": "60 (LightRAG's code)",
        "entity_tokens": "4,000 (LightRAG's code)",
        "relation_tokens": "4,000 (LightRAG's code)",
        "chunk_tokens": "4,000 (LightRAG's code)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "top_k": ">= 1",
        "entity_tokens": ">= 1",
        "relation_tokens": ">= 1",
        "chunk_tokens": ">= 1",
    }

    mode: Literal["local", "global", "hybrid", "mix"] = "hybrid"
    """local (entities), global (relations), hybrid (both) or mix (hybrid plus dense chunks)."""
    keywords: Literal["llm", "ner"] = "llm"
    """llm: one batched structured LLM call; ner: no LLM (entities low, the question high)."""
    chunk_pick: Literal["vector", "weight"] = "vector"
    """Order of a level's chunks: cosine to the question (LightRAG's kg_chunk_pick_method
    VECTOR, its default), or entity order then relation support (WEIGHT's order)."""
    top_k: int = 60
    """Entities (low level) and relations (high level) retrieved per question."""
    entity_tokens: int = 4000
    """Token budget of the Entities section (LightRAG's max_token_for_local_context)."""
    relation_tokens: int = 4000
    """Token budget of the Relations section (LightRAG's max_token_for_global_context)."""
    chunk_tokens: int = 4000
    """Token budget of the Sources section (LightRAG's max_token_for_text_unit; its order is
    the chunk ranking for Recall@k)."""

    def context_budget(self) -> int:
        """Published total of the three sections."""
        return self.entity_tokens + self.relation_tokens + self.chunk_tokens

    def llm_use(self) -> str | None:
        """LLM keywords need the LLM even with --retrieval-only."""
        return "lightrag.keywords 'llm'" if self.keywords == "llm" else None


def _by_rank(g: EntityGraph, relations: np.ndarray) -> list[int]:
    """Relation rows by rank, then weight, highest first (ties in the given order)."""
    return relations[np.lexsort((-g.weight[relations], -g.rank[relations]))].tolist()


def _low_level(g: EntityGraph, entities: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Entities as found, their relations by (rank, weight), their chunks."""
    found = np.concatenate([g.relations_of(e) for e in entities] or [np.zeros(0, np.int64)])
    _, first = np.unique(found, return_index=True)  # each relation once, where first found
    rels = _by_rank(g, found[np.sort(first)])
    return entities, rels, chunks_by_entities(g, entities)


def _high_level(g: EntityGraph, relations: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Relations by (rank, weight), their end entities and chunks in relation order."""
    rels = _by_rank(g, np.asarray(relations, dtype=np.int64))
    ents = list(dict.fromkeys(int(e) for r in rels for e in (g.src[r], g.dst[r])))
    chunks = list(dict.fromkeys(c for r in rels for c in g.relation_chunks[r].tolist()))
    return ents, rels, chunks


ANSWER_SYSTEM = """You answer a question from a knowledge base given to you as entities,
relations and source passages. Write a response of several paragraphs in Markdown, with
headings where they help, that brings together everything in the data that bears on the
question. Rest every statement on the data; where it does not answer the question, say so
rather than guess. Answer in the language of the question."""
"""LightRAG's response prompt (its `rag_response`: multiple paragraphs from the retrieved
tables, nothing unsupported), in our words."""


def answer_prompt(question: str, texts: list[str] | None, cfg=None) -> list[dict]:
    """LightRAG's long-form response prompt over its entity, relation and source sections."""
    data = "\n\n".join(texts or []) or "(nothing was retrieved)"
    user = f"Knowledge base:\n{data}\n\nQuestion: {question}\nResponse:"
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": user}]


@register(
    "lightrag",
    config=LightRAGConfig,
    answer_prompt=answer_prompt,
    prompt_style="long",
    paper="LightRAG (Guo et al., 2024): dual-level keyword retrieval, local/global/hybrid/mix",
    needs=KEYED_GRAPH_SEARCH,
    needs_note="descriptions when an LLM extracted",
)
def lightrag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Dual-level retrieval for every question of the batch."""
    cfg: LightRAGConfig = ctx.cfg.options
    texts = [q.question for q in questions]
    g = entity_graph(ctx)
    with clock.stage("keywords"):
        kw = llm_keywords(ctx, texts) if cfg.keywords == "llm" else ner_keywords(ctx, texts)
    low = [", ".join(k) for k in kw.low] if cfg.mode != "global" else []
    high = [", ".join(k) for k in kw.high] if cfg.mode != "local" else []
    asks_questions = cfg.mode == "mix" or cfg.chunk_pick == "vector"
    with clock.stage("query_vectors"):  # keys and questions in one embedding call
        low_vecs, high_vecs, q_vecs = ctx.encode_query_groups(
            low, high, texts if asks_questions else []
        )
    levels = []
    if cfg.mode != "global":
        with clock.stage("entity_search"):
            ids, _ = search(ctx, low, "entity_vectors", cfg.top_k, low_vecs)
        levels.append([_low_level(g, [e for e in row.tolist() if e >= 0]) for row in ids])
    if cfg.mode != "local":
        with clock.stage("relation_search"):
            ids, _ = search(ctx, high, "relation_vectors", cfg.top_k, high_vecs)
        levels.append([_high_level(g, [r for r in row.tolist() if r >= 0]) for row in ids])
    depth = 2 * ctx.cfg.retrieval.candidates
    dense = None
    if cfg.mode == "mix":
        with clock.stage("dense_search"):
            dense = dense_search(ctx, q_vecs, depth)
    if cfg.chunk_pick == "vector":
        with clock.stage("chunk_pick"):
            levels = [
                [(e, r, by_similarity(ctx, q_vecs[q], c)) for q, (e, r, c) in enumerate(level)]
                for level in levels
            ]
    contexts, extras, orders = [], [], []
    with clock.stage("build_context"):
        for q in range(len(texts)):
            found = [level[q] for level in levels]  # (entities, relations, chunks) per level
            ents = round_robin(*(f[0] for f in found))
            rels = round_robin(*(f[1] for f in found))
            vector_chunks = [dense.row(q)[0]] if dense is not None else []
            chunks = round_robin(*vector_chunks, *(f[2] for f in found))
            parts = [
                ("Entities", entity_lines(ctx, ents), ctx.scaled(cfg.entity_tokens)),
                ("Relations", relation_lines(ctx, rels), ctx.scaled(cfg.relation_tokens)),
                ("Sources", chunk_lines(ctx, chunks), ctx.scaled(cfg.chunk_tokens)),
            ]
            contexts.append(Context(budgeted_sections(ctx, parts)))
            orders.append(chunks)
            extras.append(
                {
                    "mode": cfg.mode,
                    "keywords": cfg.keywords,
                    "low_level_keywords": kw.low[q],
                    "high_level_keywords": kw.high[q],
                    "keyword_fallback": kw.fallback[q],
                    "entities": [g.names[e] for e in ents[:20]],
                    "relations": len(rels),
                }
            )
    tokens = [{"keywords": t} if cfg.keywords == "llm" else {} for t in kw.tokens]
    return Retrieved(from_orders(orders, depth), extras, tokens, clock.seconds, contexts)
