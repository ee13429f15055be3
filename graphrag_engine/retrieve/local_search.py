"""GraphRAG-style local search as a shared operator: the entity pick, relationship order and
four-section context of Microsoft GraphRAG's local search (Edge et al., 2024), which the
`graphrag_local` method registers and PankRAG's specific steps reuse.

For the whole batch at once:

1. Entities: the question's embedding against the entity vectors ("name: description"), top
   `top_k_entities` (one embedding and one similarity call for the batch); or, with
   `entities: ner`, the graph entities its named entities link to.
2. Community reports of those entities' communities at `community_level`, most selected
   entities first, then by rating (`community_prop` of the budget).
3. Entities and their relationships: in-network ones (both ends selected) first, then
   out-of-network ones by how many selected entities their far end links to, each group by rank
   (the ends' degree sum); at most `top_k_relationships` per selected entity (what is left of
   the budget).
4. Text units: the selected entities' chunks, by entity, then by how many of its relationships
   share the chunk (`text_unit_order: graphrag`, GraphRAG's order), or by their cosine to the
   question (`vector`, the order LightRAG's code uses for the chunks behind its entities);
   `text_unit_prop` of the budget. They are also the chunk ranking.

The context is the four sections, each cut to its share of `max_tokens` and kept whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.errors import ConfigError
from graphrag_engine.kernels.segments import first_occurrences
from graphrag_engine.retrieve.communities import communities
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import (
    EntityGraph,
    by_similarity,
    chunks_by_entities,
    entity_graph,
    search,
)
from graphrag_engine.retrieve.lines import (
    budgeted_sections,
    chunk_lines,
    entity_lines,
    fitting,
    leading_tokens,
    relation_lines,
)
from graphrag_engine.retrieve.linking import link_entities
from graphrag_engine.retrieve.types import Context


@dataclass
class GraphRAGLocalConfig:
    """GraphRAG's local search settings, its defaults (12,000 tokens of context, shrunk in
    proportion when the answer window is smaller: graphrag_engine/retrieve/budget.py)."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "entities": "embedding (GraphRAG's code)",
        "text_unit_order": "graphrag (GraphRAG's code)",
        "top_k_entities": "10 (GraphRAG's code)",
        "top_k_relationships": "10 (GraphRAG's code)",
        "max_tokens": "12,000 (GraphRAG's code)",
        "text_unit_prop": "0.5 (GraphRAG's code)",
        "community_prop": "0.1 (GraphRAG's code)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "top_k_entities": ">= 1",
        "top_k_relationships": ">= 1",
        "max_tokens": ">= 1",
        "text_unit_prop": "[0, 1]",
        "community_prop": "[0, 1]",
    }

    entities: Literal["embedding", "ner"] = "embedding"
    """embedding: the question's vector against entity descriptions; ner: linked entities."""
    text_unit_order: Literal["graphrag", "vector"] = "vector"
    """Order of the selected entities' chunks: by cosine to the question (LightRAG's VECTOR
    pick; chosen on the train sets, docs/benchmarks/train_picks.md), or by entity, then relationship
    support (`graphrag`: GraphRAG's code)."""
    top_k_entities: int = 10
    """Entities selected per question."""
    top_k_relationships: int = 10
    """Relationships kept per selected entity."""
    community_level: int = 2
    """Reports of each entity's community at the deepest level <= this one."""
    max_tokens: int = 12000
    """Token budget of the whole local context (entities, relationships, reports, text units;
    GraphRAG's local search default)."""
    text_unit_prop: float = 0.5
    """Share of max_tokens for text units."""
    community_prop: float = 0.1
    """Shares of max_tokens for text units and community reports; entities and relationships
    get the rest. Without reports in the index their share goes to the text units."""

    def context_budget(self) -> int:
        """Published total of the local context."""
        return self.max_tokens

    def validate(self, where: str) -> None:
        """Shares that leave room for entities (single-field ranges are in RANGES)."""
        if self.text_unit_prop + self.community_prop >= 1:
            raise ConfigError(
                f"{where}: graphrag_local.text_unit_prop + community_prop must lie in [0, 1)"
            )


def relationships(
    g: EntityGraph,
    selected: list[int],
    cap: int,
    keep: np.ndarray | None = None,
    rank: np.ndarray | None = None,
) -> list[int]:
    """GraphRAG's relationship order: in-network, then out-of-network by links of the far end
    to the selected entities, each by rank; `cap` in all. Array operations over the selected
    entities' relation lists (first-seen order, stable sorts), so a hub entity's thousands of
    relations cost no Python loop. `keep` (a mask over relations) and `rank` order a subgraph
    as if it stood alone (KET-RAG's skeleton)."""
    if not selected:
        return []
    touching = first_occurrences(np.concatenate([g.relations_of(e) for e in selected]))
    if keep is not None:
        touching = touching[keep[touching]]
    chosen = np.asarray(selected, dtype=np.int64)
    src_in, dst_in = np.isin(g.src[touching], chosen), np.isin(g.dst[touching], chosen)
    both = src_in & dst_in
    inside, outside = touching[both], touching[~both]
    far = np.where(src_in[~both], g.dst[outside], g.src[outside])
    _, where, counts = np.unique(far, return_inverse=True, return_counts=True)
    rank = g.rank if rank is None else rank
    inside = inside[np.lexsort((-g.weight[inside], -rank[inside]))]
    outside = outside[np.lexsort((-rank[outside], -counts[where]))]
    return np.concatenate([inside, outside])[:cap].tolist()


def text_vectors(
    ctx: QueryContext, cfg: GraphRAGLocalConfig, texts: list[str]
) -> np.ndarray | None:
    """The texts' query vectors (one call) when the entity pick or the text-unit order needs
    them, else None."""
    if cfg.entities == "embedding" or cfg.text_unit_order == "vector":
        return ctx.encode_queries(texts)
    return None


def pick_entities(
    ctx: QueryContext,
    cfg: GraphRAGLocalConfig,
    texts: list[str],
    vectors: np.ndarray | None = None,
) -> list[list[int]]:
    """The entities of every text: top-k by description embedding (one call), or linked NER."""
    return [list(found) for found in scored_entities(ctx, cfg, texts, vectors)]


def text_units(
    ctx: QueryContext,
    cfg: GraphRAGLocalConfig,
    g: EntityGraph,
    ents: list[int],
    vector: np.ndarray | None,
) -> list[int]:
    """One text's text units: its entities' chunks in the configured order."""
    chunks = chunks_by_entities(g, ents)
    return by_similarity(ctx, vector, chunks) if cfg.text_unit_order == "vector" else chunks


def scored_entities(
    ctx: QueryContext,
    cfg: GraphRAGLocalConfig,
    texts: list[str],
    vectors: np.ndarray | None = None,
) -> list[dict[int, float]]:
    """Per text, its entities (best first) with their retrieval scores: the cosine of the
    entity's description to the text (embedded once; `vectors` when given), or the link
    score of a named entity it mentions."""
    if cfg.entities == "ner":
        links, _ = link_entities(ctx, texts, top_k=1)
        return [
            {e: float(lk[e]) for e in sorted(lk, key=lk.get, reverse=True)[: cfg.top_k_entities]}
            for lk in links
        ]
    ids, scores = search(ctx, texts, "entity_vectors", cfg.top_k_entities, vectors)
    return [
        {int(e): float(sc) for e, sc in zip(row.tolist(), srow.tolist(), strict=True) if e >= 0}
        for row, srow in zip(ids, scores, strict=True)
    ]


def local_context(
    ctx: QueryContext,
    cfg: GraphRAGLocalConfig,
    ents: list[int],
    chunks: list[int],
    rels: list[int] | None = None,
    total: float | None = None,
) -> tuple[Context, dict]:
    """The four sections of one question's local search, its text units in `chunks` order:
    the entities' relationships in GraphRAG's order unless `rels` are given, the shares of
    `total` tokens (default: max_tokens fitted to the answer window)."""
    g = entity_graph(ctx)
    total = ctx.scaled(cfg.max_tokens) if total is None else total
    comms = communities(ctx)
    community_of = (
        ctx.memo(
            ("community_of", cfg.community_level), lambda: comms.of_entity(cfg.community_level)
        )
        if comms is not None
        else {}
    )
    has_reports = bool(comms is not None and comms.report)
    report_share = cfg.community_prop if has_reports else 0.0
    unit_share = cfg.text_unit_prop + (cfg.community_prop - report_share)
    sections = []
    if has_reports:
        counts: dict[int, int] = {}
        for e in ents:
            if e in community_of and community_of[e] in comms.report:
                counts[community_of[e]] = counts.get(community_of[e], 0) + 1
        order = sorted(counts, key=lambda c: (-counts[c], -comms.report[c][2]))
        reports = [comms.report_text(c) for c in order]
        sections.append(("Reports", reports, report_share * total))
    if rels is None:
        rels = relationships(g, ents, cfg.top_k_relationships * max(len(ents), 1))
    local = (1.0 - cfg.text_unit_prop - cfg.community_prop) * total
    ranked = entity_lines(ctx, ents)
    kept = fitting(ctx, ranked, int(local))
    sections.append(("Entities", ranked.head(kept), local))
    used = leading_tokens(ctx, ranked, kept)
    sections.append(("Relationships", relation_lines(ctx, rels), local - used))
    sources = chunk_lines(ctx, chunks)
    sections.append(("Sources", sources, unit_share * total))
    extra = {
        "entities_by": cfg.entities,
        "entities": [g.names[e] for e in ents],
        "relationships": len(rels),
        "reports_in_index": has_reports,
    }
    return Context(budgeted_sections(ctx, sections)), extra
