"""PankRAG (2025): a plan of sub-questions per question, executed level by level across the
whole batch, with dependency-aware reranking of what each sub-question retrieves.

1. Plan (3.2): every question's sub-question DAG ("#k" names step k's answer). `plan: gold`
   reads MuSiQue's gold decomposition (an oracle, so execution is measured apart from the
   planner); `plan: direct` is the paper's -Path ablation (the question is its only step). The
   LLM planner is issue 19's next part; it will produce the same `Plan`s.
2. Level-synchronous execution (3.3): level 0 of every plan is retrieved in one batch, then
   level 1 with the resolved answers substituted for "#k", and so on. A specific sub-question
   uses GraphRAG-style local search (entities by description embedding, their relationships,
   community reports, text units); an abstract one would use community-report search.
3. Dependency-aware reranking (3.3.2, Eq. 4-5), only for a sub-question with resolved
   dependencies: each retrieved chunk's score becomes alpha * R + beta * M, R its retrieval
   score (the local-search order as 1 / rank) and M the cosine between the chunk and the
   resolved dependencies ("sub-question: answer"), one embedding and one similarity call per
   level (`rerank: false`: the -Ank ablation).
4. Answers of intermediate steps: the LLM answers each level in one batched call
   (`sub_answers: llm`), or, with gold plans, the gold step answers stand in (`gold`: LLM-free).

The question's context is the final step's local search plus the resolved steps as a section;
the chunk ranking (for Recall@k) interleaves every step's chunks, in plan order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from engine.errors import ConfigError
from engine.eval.datasets import Question
from engine.methods.answer import answer_batch
from engine.methods.base import register
from engine.methods.graphrag_local import GraphRAGLocalConfig, local_context, pick_entities
from engine.retrieve.context import QueryContext
from engine.retrieve.entity_graph import chunks_by_entities, entity_graph
from engine.retrieve.plans import Plan, direct, gold_plan, substitute
from engine.retrieve.ranking import from_orders, round_robin
from engine.retrieve.types import Context, Retrieved, Section, StageClock
from kernels.similarity import l2_normalize


@dataclass
class PankRAGConfig:
    """PankRAG's execution settings (section 4.4: alpha 0.6 / beta 0.4 for specific questions,
    0.75 / 0.25 for abstract ones; alpha + beta = 1) and its ablations."""

    plan: Literal["gold", "direct"] = "gold"
    """gold: MuSiQue's decomposition (oracle); direct: -Path (the question as its only step)."""
    sub_answers: Literal["llm", "gold"] = "llm"
    """Who answers intermediate steps: the LLM (one batched call per level), or the gold
    decomposition's answers (gold plans only; no LLM before the final answer)."""
    rerank: bool = True
    """False: -Ank (no dependency-aware reranking)."""
    alpha_specific: float = 0.6
    alpha_abstract: float = 0.75
    local: GraphRAGLocalConfig = field(default_factory=GraphRAGLocalConfig)
    """The local search of specific sub-questions (graphrag_local's keys)."""
    sub_answer_tokens: int = 48

    def validate(self, where: str) -> None:
        """Weights in [0, 1]; gold answers need gold plans."""
        if not (0 <= self.alpha_specific <= 1 and 0 <= self.alpha_abstract <= 1):
            raise ConfigError(f"{where}: pankrag.alpha_* must lie in [0, 1] (beta = 1 - alpha)")
        if self.sub_answers == "gold" and self.plan != "gold":
            raise ConfigError(f"{where}: pankrag.sub_answers 'gold' needs plan 'gold'")
        self.local.validate(f"{where}: pankrag.local")

    def llm_use(self) -> str | None:
        """LLM sub-answers need the LLM even with --retrieval-only."""
        return "pankrag.sub_answers 'llm'" if self.sub_answers == "llm" else None


def combined_order(
    chunks: list[int], chunk_vectors: np.ndarray, dependency: np.ndarray, alpha: float
) -> tuple[list[int], np.ndarray]:
    """Eq. 4-5: chunks re-sorted by alpha * R + (1 - alpha) * M, R = 1 / rank of the original
    order and M = cosine(chunk, resolved dependencies); stable on ties."""
    if not chunks:
        return [], np.zeros(0)
    r = 1.0 / (1.0 + np.arange(len(chunks)))
    m = l2_normalize(chunk_vectors[chunks]) @ dependency
    score = alpha * r + (1.0 - alpha) * m
    order = np.lexsort((np.arange(len(chunks)), -np.round(score, 6)))
    return [chunks[i] for i in order], score[order]


@register(
    "pankrag",
    config=PankRAGConfig,
    paper="PankRAG (2025): sub-question DAG, level-synchronous execution, Eq. 5 reranking",
    needs="entity graph with entity vectors; MuSiQue-style gold decompositions for plan: gold",
)
def pankrag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Plan, then run every question's plan level by level, one batch per level."""
    cfg: PankRAGConfig = ctx.cfg.options
    with clock.stage("plan"):
        plans: list[Plan] = [
            gold_plan(q) if cfg.plan == "gold" else direct(q.question) for q in questions
        ]
    g = entity_graph(ctx)
    levels = [p.levels() for p in plans]
    answers: list[dict[int, str]] = [{} for _ in questions]
    asked: list[dict[int, str]] = [{} for _ in questions]
    found: list[dict[int, tuple[list[int], list[int]]]] = [{} for _ in questions]
    tokens: list[dict[str, int]] = [{} for _ in questions]
    chunk_vecs = ctx.index.vectors("chunk_vectors") if cfg.rerank else None
    for depth in range(max(map(len, levels), default=0)):
        jobs = [(q, s) for q, lv in enumerate(levels) if depth < len(lv) for s in lv[depth]]
        texts = [substitute(plans[q].steps[s].text, answers[q]) for q, s in jobs]
        for (q, s), t in zip(jobs, texts, strict=True):
            asked[q][s] = t
        with clock.stage("local_search"):
            picked = pick_entities(ctx, cfg.local, texts)
            chunks = [chunks_by_entities(g, ents) for ents in picked]
        with clock.stage("rerank"):
            needs = [i for i, (q, s) in enumerate(jobs) if plans[q].steps[s].depends_on]
            if cfg.rerank and needs:
                deps = [
                    " ".join(
                        f"{asked[q][d]}: {answers[q][d]}" for d in plans[q].steps[s].depends_on
                    )
                    for q, s in (jobs[i] for i in needs)
                ]
                dep_vecs = l2_normalize(ctx.encode_queries(deps))
                for i, vec in zip(needs, dep_vecs, strict=True):
                    q, s = jobs[i]
                    alpha = (
                        cfg.alpha_specific
                        if plans[q].steps[s].scope == "specific"
                        else cfg.alpha_abstract
                    )
                    chunks[i], _ = combined_order(chunks[i], chunk_vecs, vec, alpha)
        for (q, s), ents, ch in zip(jobs, picked, chunks, strict=True):
            found[q][s] = (ents, ch)
        last = [i for i, (q, s) in enumerate(jobs) if s < len(plans[q].steps) - 1]
        with clock.stage("sub_answers"):
            if cfg.sub_answers == "gold":
                for q, s in (jobs[i] for i in last):
                    answers[q][s] = questions[q].decomposition[s].get("answer", "")
            elif last:
                contexts = [
                    local_context(ctx, cfg.local, *found[q][s])[0]
                    for q, s in (jobs[i] for i in last)
                ]
                done = answer_batch(
                    ctx.llm,
                    ctx.tokenizer,
                    [texts[i] for i in last],
                    contexts,
                    ctx.cfg.generation.max_context_tokens,
                    cfg.sub_answer_tokens,
                    stage="pankrag_sub",
                )
                for (q, s), a, t in zip(
                    (jobs[i] for i in last), done.answers, done.tokens, strict=True
                ):
                    answers[q][s] = a
                    for k, v in t.items():
                        tokens[q][k] = tokens[q].get(k, 0) + v
    contexts, orders, extras = [], [], []
    with clock.stage("build_context"):
        for q, plan in enumerate(plans):
            final = len(plan.steps) - 1
            context, extra = local_context(ctx, cfg.local, *found[q][final])
            resolved = [f"{asked[q][s]} -> {answers[q][s]}" for s in range(final)]
            if resolved:
                context = Context(
                    [Section(resolved, "-----Resolved sub-questions-----", True), *context.sections]
                )
            contexts.append(context)
            orders.append(round_robin(*(found[q][s][1] for s in range(len(plan.steps)))))
            extras.append(
                {
                    "plan_source": plan.source,
                    "plan": [
                        {
                            "step": s + 1,
                            "question": asked[q][s],
                            "depends_on": [d + 1 for d in st.depends_on],
                            "answer": answers[q].get(s),
                        }
                        for s, st in enumerate(plan.steps)
                    ],
                    "levels": len(levels[q]),
                    "entities": extra["entities"][:10],
                }
            )
    depth = 2 * ctx.cfg.retrieval.candidates
    return Retrieved(from_orders(orders, depth), extras, tokens, clock.seconds, contexts)
