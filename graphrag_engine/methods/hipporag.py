"""HippoRAG-style retrieval: personalized PageRank over the passage-entity graph.

1. Query entities: NER on every question, each mention linked to its nearest graph entity by
   embedding (one NER pass, one embedding call, one similarity call for the whole batch), and
   (HippoRAG 2) the ends of the `fact_top_k` relations nearest the question, at the mean cosine
   of their facts (`link: both`, the default; `entities` / `facts`: one of the two).
2. Seeds: linked entities weighted by similarity x node specificity (1 / number of passages
   mentioning the entity, HippoRAG's IDF-like weight); optionally passage nodes weighted by
   their dense similarity x `passage_weight` (HippoRAG 2's dense-sparse integration).
3. One batched PPR (damping 0.5 as in HippoRAG) for all questions, over the passage-entity
   graph and the index's synonym edges between entities (HippoRAG 2); passages ranked by their
   PPR mass. A question that links no entity and has no passage seeds falls back to dense.

The PPR keeps only each question's best passages: on a GPU the exact batched solver picks
them on the device; on the CPU the forward push (`ppr: local`) touches only the neighbourhood
the seeds' mass reaches, so a question's cost does not grow with the whole graph
(bench/scale.py; its rankings agree with the exact solver's, tests/integration/test_query.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.ppr import personalized_pagerank
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.dense import dense_search
from graphrag_engine.retrieve.linking import link_and_embed, link_facts
from graphrag_engine.retrieve.ranking import ChunkRanking
from graphrag_engine.retrieve.synonyms import with_synonyms
from graphrag_engine.retrieve.types import Retrieved, StageClock

GRAPH = "graph_passage_entity"
NEEDS = {Part.CHUNKS, Part.CHUNK_VECTORS, Part.PASSAGE_ENTITY_GRAPH, Part.ENTITY_VECTORS}


@dataclass
class HippoRAGConfig:
    """HippoRAG-style PPR over the passage-entity graph."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "damping": "0.5 (HippoRAG)",
        "link": "entities (HippoRAG); facts (HippoRAG 2)",
        "fact_top_k": "5 (HippoRAG 2)",
        "passage_weight": "0.05 (HippoRAG 2)",
        "specificity": "true (HippoRAG)",
        "synonyms": "true (HippoRAG 2)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "damping": "(0, 1)",
        "link_threshold": "[-1, 1]",
        "link_top_k": ">= 1",
        "fact_top_k": ">= 1",
        "push_eps": "> 0",
    }

    damping: float = 0.5
    """HippoRAG's PPR damping (probability of following an edge)."""
    link: Literal["entities", "facts", "both"] = "both"
    """Entity seeds from the question's NER mentions linked to graph entities (`entities`,
    HippoRAG), from the ends of the relations nearest the question (`facts`, HippoRAG 2's
    query-to-triple link over the relation vectors), or both, each entity at its better score
    (chosen on the train sets, docs/benchmarks/train_picks.md)."""
    fact_top_k: int = 3
    """facts / both: relations linked per question (HippoRAG 2 links 5; 3 chosen on train)."""
    link_threshold: float = 0.0
    """Query entity -> graph entity links below this cosine are dropped."""
    link_top_k: int = 1
    """Graph entities linked per query entity."""
    passage_weight: float = 0.05
    """Seed mass on passage nodes from dense similarity (HippoRAG 2); 0 = entities only (HippoRAG 1)."""
    specificity: bool = True
    """Weight entity seeds by 1 / (number of passages mentioning them) (HippoRAG's node specificity)."""
    synonyms: bool = True
    """Walk the index's synonym edges too (HippoRAG 2; graph.synonym_threshold builds them)."""
    ppr: Literal["auto", "exact", "local"] = "auto"
    """exact: batched power iteration over the whole graph; local: forward push from the seeds
    (residual below `push_eps` per unit of degree); auto: exact on a GPU (`retrieval.device`),
    local on the CPU."""
    push_eps: float = 1e-6
    """local: the push's residual threshold per unit of degree (smaller is closer to exact and
    slower; docs/methods/hipporag.md gives how close 1e-6 is)."""

    def needs(self) -> set[Part]:
        """The passage-entity graph always; the relations and their vectors to link facts."""
        facts = {Part.ENTITY_GRAPH, Part.RELATION_VECTORS} if self.link != "entities" else set()
        return NEEDS | facts


@register(
    "hipporag",
    config=HippoRAGConfig,
    paper="HippoRAG (Gutierrez et al., NeurIPS 2024) / HippoRAG 2, PPR over passages",
    needs=NEEDS,
)
def hipporag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Rank chunks for every question by PPR from its linked entities (and dense passages)."""
    cfg: HippoRAGConfig = ctx.cfg.options
    depth = 2 * ctx.cfg.retrieval.candidates
    texts = [q.question for q in questions]
    with clock.stage("link_entities"):  # questions and their mentions: one embedding call
        named, mentions = [{} for _ in texts], [[] for _ in texts]
        if cfg.link != "facts":
            named, mentions, qvec = link_and_embed(ctx, texts, cfg.link_top_k, cfg.link_threshold)
        else:
            qvec = ctx.encode_queries(texts)
        facts = [{} for _ in texts]
        if cfg.link != "entities":
            facts = link_facts(ctx, texts, qvec, cfg.fact_top_k)
        links = [_merged(n, f) for n, f in zip(named, facts, strict=True)]
    with clock.stage("dense_search"):
        dense = dense_search(ctx, qvec, depth)
    with clock.stage("ppr"):
        graph = with_synonyms(ctx, GRAPH) if cfg.synonyms else ctx.graph(GRAPH)
        c0, c1 = ctx.graph_parts(GRAPH)["chunk"]
        e0 = ctx.graph_parts(GRAPH)["entity"][0]
        degree = np.diff(ctx.graph(GRAPH).indptr)  # passages per entity, synonyms aside
        seeds, has_seed = [], []
        for q, linked in enumerate(links):
            spec: dict[int, float] = {}
            if linked:
                w = {
                    e0 + e: s / (degree[e0 + e] if cfg.specificity and degree[e0 + e] else 1.0)
                    for e, s in linked.items()
                    if s > 0
                }
                total = sum(w.values())
                spec.update({n: v / total for n, v in w.items()} if total > 0 else {})
            if cfg.passage_weight > 0:
                rows, scores = dense.row(q)
                spec.update(_passage_seeds(rows, scores, c0, cfg.passage_weight))
            has_seed.append(bool(spec))
            seeds.append(spec or {c0: 1.0})
        mode = cfg.ppr if cfg.ppr != "auto" else ("local" if ctx.device == "cpu" else "exact")
        result = personalized_pagerank(
            graph, seeds, damping=cfg.damping, mode=mode, eps=cfg.push_eps,
            device=ctx.device, topk=depth, within=(c0, c1),
        )  # fmt: skip
        nodes, scores = result.topk(depth)
        ranking = ChunkRanking(np.where(nodes >= 0, nodes - c0, -1), scores.astype(np.float32))
        ranking.ids[ranking.scores <= 0] = -1
    fallback = [q for q, ok in enumerate(has_seed) if not ok]
    _fallback_to(ranking, dense, fallback)
    extras = [
        {
            "query_entities": m,
            "linked_entities": _by_score(ctx, lk),
            "fact_entities": _by_score(ctx, fl),
            "fallback": q in fallback,
        }
        for q, (m, lk, fl) in enumerate(zip(mentions, named, facts, strict=True))
    ]
    return Retrieved(ranking, extras, [{} for _ in questions], clock.seconds)


def _merged(a: dict[int, float], b: dict[int, float]) -> dict[int, float]:
    """Two link maps as one, each entity at its better score."""
    return {e: max(a.get(e, -1.0), b.get(e, -1.0)) for e in {**a, **b}}


def _by_score(ctx: QueryContext, links: dict[int, float]) -> list[str]:
    """Linked entities' names, best score first."""
    return [ctx.entities["name"][e] for e in sorted(links, key=links.get, reverse=True)]


def _passage_seeds(
    rows: list[int], scores: list[float], offset: int, weight: float
) -> dict[int, float]:
    """Dense passage seeds: min-max normalised similarity x weight."""
    if not rows:
        return {}
    s = np.asarray(scores, dtype=np.float64)
    span = s.max() - s.min()
    norm = (s - s.min()) / span if span > 0 else np.ones_like(s)
    return {offset + r: weight * v for r, v in zip(rows, norm, strict=True) if v > 0}


def _fallback_to(ranking: ChunkRanking, dense: ChunkRanking, rows: list[int]) -> None:
    for q in rows:
        ranking.ids[q], ranking.scores[q] = dense.ids[q], dense.scores[q]
