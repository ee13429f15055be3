"""PankRAG (2025): a plan of sub-questions per question, executed level by level across the
whole batch, with dependency-aware reranking of what each sub-question retrieves.

1. Plan (3.2): every question's sub-question DAG ("#k" names step k's answer), from one
   batched, schema-constrained LLM call (`plan: llm`): independent facts as parallel steps,
   later steps naming earlier answers, vague wording made explicit, each step labelled
   specific or abstract. A plan that never validates (cycle, dangling reference) leaves the
   question as its only step, counted. `plan: gold` reads MuSiQue's gold decomposition (an
   oracle, so execution is measured apart from the planner); `plan: direct` is the paper's
   -Path ablation (the question is its only step).
2. Level-synchronous execution (3.3): level 0 of every plan is retrieved in one batch, then
   level 1, and so on. Top-down disambiguation (3.2): before a level runs, each of its steps
   that depends on earlier ones is rewritten by the LLM with its parents' answers into a
   self-contained sub-question, one batched call per level (`rewrite: llm`); `substitute`
   puts the answers in for "#k" without an LLM (the fallback of a rewrite that never
   validates, and the default with gold answers). A specific sub-question
   uses GraphRAG-style local search (entities by description embedding, their relationships,
   community reports, text units); an abstract one uses hierarchical community-report search
   (`report_search`: leaf reports where they fit the sub-question better, broader ones
   otherwise). `scope` picks the label: the plan's (the default), the question's type (the
   paper's per-dataset choice, `query_type`), or one for every step. An index without
   reports serves abstract steps by local search, counted in `abstract_as_local`.
3. Dependency-aware reranking (3.3.2, Eq. 4-5), only for a sub-question with resolved
   dependencies: each retrieved chunk's score becomes alpha * R + beta * M, R its retrieval
   score (the cosine of the entity, or the report, that brought the chunk to the sub-question,
   min-max normalised over the sub-question's chunks) and M the cosine between the chunk and
   the resolved dependencies ("sub-question: answer"), one embedding and one similarity call
   per level (`rerank: false`: the -Ank ablation). The reranked chunks are the step's context
   for abstract steps too, under the reports.
4. Answers of intermediate steps: the LLM answers each level in one batched call
   (`sub_answers: llm`), or, with gold plans, the gold step answers stand in (`gold`: LLM-free).

The question's context is the final step's search plus the resolved steps as a section; the
chunk ranking (for Recall@k) interleaves every step's chunks, in plan order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.methods.pankrag.config import NEEDS, PankRAGConfig
from graphrag_engine.methods.pankrag.plans import (
    Plan,
    Scope,
    direct,
    gold_plan,
    make_plans,
    rewrite_steps,
    substitute,
)
from graphrag_engine.retrieve.answer import LONG_KINDS, answer_batch
from graphrag_engine.retrieve.communities import communities, report_search
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import chunks_by_entities, entity_graph
from graphrag_engine.retrieve.lines import Lines, chunk_lines, within_budget
from graphrag_engine.retrieve.local_search import (
    local_context,
    scored_entities,
    text_units,
    text_vectors,
)
from graphrag_engine.retrieve.ranking import from_orders, round_robin
from graphrag_engine.retrieve.types import (
    Context,
    Retrieved,
    Section,
    StageClock,
    stage_tokens,
    summed_tokens,
    tokens_by_question,
)


def combined_order(
    chunks: list[int],
    retrieval: list[float],
    chunk_vectors: np.ndarray,
    dependency: np.ndarray,
    alpha: float,
) -> tuple[list[int], np.ndarray]:
    """Eq. 4-5: chunks re-sorted by alpha * R + (1 - alpha) * M, R = the chunks' retrieval
    scores min-max normalised over this sub-question (all 1 when they are equal) and M =
    cosine(chunk, resolved dependencies); stable on ties."""
    if not chunks:
        return [], np.zeros(0)
    r = np.asarray(retrieval, dtype=np.float64)
    span = r.max() - r.min()
    r = (r - r.min()) / span if span > 1e-12 else np.ones_like(r)
    m = l2_normalize(chunk_vectors[chunks]) @ dependency
    score = alpha * r + (1.0 - alpha) * m
    order = np.lexsort((np.arange(len(chunks)), -np.round(score, 6)))
    return [chunks[i] for i in order], score[order]


@register(
    "pankrag",
    config=PankRAGConfig,
    paper="PankRAG (2025): sub-question DAG planning, level-synchronous execution, Eq. 5 reranking",
    needs=NEEDS,
    uses={Part.COMMUNITY_REPORTS},
    needs_note="scope: abstract needs community_reports, plan: gold gold_decompositions",
)
def pankrag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Plan, then run every question's plan level by level, one batch per level."""
    cfg: PankRAGConfig = ctx.cfg.options
    with clock.stage("plan"):
        plans, fallback, plan_tokens = plan_all(ctx, cfg, questions)
    spent = [plan_tokens]  # each stage's per-question LLM tokens, in the order they ran
    scopes = [
        [step_scope(cfg, p, s, q.kind) for s in range(len(p.steps))]
        for p, q in zip(plans, questions, strict=True)
    ]
    levels = [p.levels() for p in plans]
    answers: list[dict[int, str]] = [{} for _ in questions]
    asked: list[dict[int, str]] = [{} for _ in questions]
    found: list[dict[int, Found]] = [{} for _ in questions]
    rewrite_fallbacks = [0] * len(questions)
    for depth in range(max(map(len, levels), default=0)):
        jobs = [(q, s) for q, lv in enumerate(levels) if depth < len(lv) for s in lv[depth]]
        with clock.stage("rewrite"):
            level = level_texts(ctx, cfg, questions, plans, jobs, asked, answers)
        texts = level.texts
        for (q, s), t, fell in zip(jobs, texts, level.fallback, strict=True):
            asked[q][s] = t
            rewrite_fallbacks[q] += int(fell)
        spent.append(tokens_by_question([q for q, _ in jobs], level.tokens, len(questions)))
        with clock.stage("search"):
            hits = search_level(ctx, cfg, texts, [scopes[q][s] for q, s in jobs])
        with clock.stage("rerank"):
            if cfg.rerank:
                rerank_level(ctx, cfg, jobs, plans, scopes, asked, answers, hits)
        for (q, s), hit in zip(jobs, hits, strict=True):
            found[q][s] = hit
        inner = [(q, s) for q, s in jobs if s < len(plans[q].steps) - 1]
        with clock.stage("sub_answers"):
            given, sub_tokens = answer_level(ctx, cfg, questions, inner, asked, found)
        for (q, s), a in zip(inner, given, strict=True):
            answers[q][s] = a
        spent.append(tokens_by_question([q for q, _ in inner], sub_tokens, len(questions)))
    contexts, orders, extras = [], [], []
    with clock.stage("build_context"):
        for q, plan in enumerate(plans):
            final = len(plan.steps) - 1
            context = step_context(ctx, cfg, found[q][final])
            resolved = [f"{asked[q][s]} -> {answers[q][s]}" for s in range(final)]
            if resolved:
                context = Context(
                    [Section(resolved, "-----Resolved sub-questions-----", True), *context.sections]
                )
            contexts.append(context)
            orders.append(round_robin(*(found[q][s].chunks for s in range(len(plan.steps)))))
            extras.append(plan_extras(plan, scopes[q], levels[q], asked[q], answers[q], found[q]))
            extras[-1]["plan_fallback"] = fallback[q]
            extras[-1]["rewrite_fallbacks"] = rewrite_fallbacks[q]
    depth = 2 * ctx.cfg.retrieval.candidates
    tokens = summed_tokens(*spent)
    return Retrieved(from_orders(orders, depth), extras, tokens, clock.seconds, contexts)


@dataclass
class Found:
    """What one sub-question's search found: its search ("local" or "reports"), the entity
    or community rows behind it, and its chunks in ranked order."""

    search: str
    rows: list[int]
    chunks: list[int]
    scores: list[float]
    """Each chunk's retrieval score: the cosine of the entity or report that brought it."""


def plan_all(
    ctx: QueryContext, cfg: PankRAGConfig, questions: list[Question]
) -> tuple[list[Plan], list[bool], list[dict[str, int]]]:
    """Every question's plan (LLM: one batched call), whether it fell back, its LLM tokens."""
    none: list[dict[str, int]] = [{} for _ in questions]
    if cfg.plan == "gold":
        return [gold_plan(q) for q in questions], [False] * len(questions), none
    if cfg.plan == "direct":
        return [direct(q.question) for q in questions], [False] * len(questions), none
    retries = ctx.cfg.models.llm.parse_retries
    run = make_plans(ctx.llm, [q.question for q in questions], cfg.max_steps, retries)
    return run.plans, run.fallback, stage_tokens("pankrag_plan", run.tokens)


def step_scope(cfg: PankRAGConfig, plan: Plan, s: int, kind: str = "passage") -> Scope:
    """A step's search: the plan's label for LLM plans under `scope: plan` (specific for gold
    and direct plans), the question's type under `scope: query_type` (abstract for a
    long-form question kind), else the config's."""
    if cfg.scope == "query_type":
        return "abstract" if kind in LONG_KINDS else "specific"
    if cfg.scope != "plan":
        return cfg.scope
    return plan.steps[s].scope if plan.source == "llm" else "specific"


def search_level(
    ctx: QueryContext, cfg: PankRAGConfig, texts: list[str], scopes: list[Scope]
) -> list[Found]:
    """One level's searches: local search for specific steps (one entity search call),
    report search for abstract ones (one call) when the index has reports."""
    g = entity_graph(ctx)
    comms = communities(ctx)
    reported = comms is not None and bool(comms.report)
    wide = [i for i, sc in enumerate(scopes) if sc == "abstract" and reported]
    narrow = [i for i, sc in enumerate(scopes) if not (sc == "abstract" and reported)]
    out: list[Found | None] = [None] * len(texts)
    narrow_texts = [texts[i] for i in narrow]
    vectors = text_vectors(ctx, cfg.local, narrow_texts) if narrow else None
    picked = scored_entities(ctx, cfg.local, narrow_texts, vectors)
    for k, (i, ents) in enumerate(zip(narrow, picked, strict=True)):
        units = text_units(ctx, cfg.local, g, list(ents), None if vectors is None else vectors[k])
        out[i] = Found("local", list(ents), *scored_chunks(g, ents, units))
    hits = report_search(ctx, comms, [texts[i] for i in wide], cfg.top_k_reports) if wide else []
    for i, reports in zip(wide, hits, strict=True):
        members: dict[int, float] = {}  # each member entity scored by its best report
        for c, score in reports:
            for e in comms.members[c]:
                members.setdefault(e, float(score))
        out[i] = Found("reports", [c for c, _ in reports], *scored_chunks(g, members))
    return out


def scored_chunks(
    g, entities: dict[int, float], chunks: list[int] | None = None
) -> tuple[list[int], list[float]]:
    """The chunks of `entities` (best first), in GraphRAG's text-unit order unless `chunks`
    gives them in another, each scored by the best entity that brought it."""
    if chunks is None:
        chunks = chunks_by_entities(g, list(entities))
    score: dict[int, float] = {}
    for e, sc in entities.items():
        for c in g.entity_chunks[e].tolist():
            score.setdefault(c, sc)
    return chunks, [score[c] for c in chunks]


def rerank_level(
    ctx: QueryContext,
    cfg: PankRAGConfig,
    jobs: list[tuple[int, int]],
    plans: list[Plan],
    scopes: list[list[Scope]],
    asked: list[dict[int, str]],
    answers: list[dict[int, str]],
    hits: list[Found],
) -> None:
    """Eq. 4-5 on every step of the level with resolved dependencies (one embedding call)."""
    needs = [i for i, (q, s) in enumerate(jobs) if plans[q].steps[s].depends_on]
    if not needs:
        return
    deps = [
        " ".join(f"{asked[q][d]}: {answers[q][d]}" for d in plans[q].steps[s].depends_on)
        for q, s in (jobs[i] for i in needs)
    ]
    chunk_vecs = ctx.vectors("chunk_vectors")
    for i, vec in zip(needs, l2_normalize(ctx.encode_queries(deps)), strict=True):
        q, s = jobs[i]
        alpha = cfg.alpha_specific if scopes[q][s] == "specific" else cfg.alpha_abstract
        order = {c: k for k, c in enumerate(hits[i].chunks)}
        hits[i].chunks, _ = combined_order(hits[i].chunks, hits[i].scores, chunk_vecs, vec, alpha)
        hits[i].scores = [hits[i].scores[order[c]] for c in hits[i].chunks]


def answer_level(
    ctx: QueryContext,
    cfg: PankRAGConfig,
    questions: list[Question],
    inner: list[tuple[int, int]],
    asked: list[dict[int, str]],
    found: list[dict[int, Found]],
) -> tuple[list[str], list[dict[str, int]]]:
    """Answers of the level's intermediate steps (gold ones, or one batched LLM call) and
    the LLM tokens of each."""
    if cfg.sub_answers == "gold":
        gold = [questions[q].decomposition[s].get("answer", "") for q, s in inner]
        return gold, [{} for _ in inner]
    if not inner:
        return [], []
    done = answer_batch(
        ctx.llm,
        ctx.count_tokens,
        [asked[q][s] for q, s in inner],
        [step_context(ctx, cfg, found[q][s]) for q, s in inner],
        ctx.context_tokens,
        cfg.sub_answer_tokens,
        stage="pankrag_sub",
    )
    return list(done.answers), list(done.tokens)


def step_context(ctx: QueryContext, cfg: PankRAGConfig, hit: Found) -> Context:
    """A step's context: local search's sections, or its reports (best first, whole) with the
    chunks behind them in their (reranked) order."""
    if hit.search == "local":
        return local_context(ctx, cfg.local, hit.rows, hit.chunks)[0]
    comms = communities(ctx)
    reports = Lines(hit.rows, comms.report_text)
    kept = within_budget(ctx, reports, ctx.scaled(cfg.report_tokens))
    sources = within_budget(ctx, chunk_lines(ctx, hit.chunks), ctx.scaled(cfg.report_chunk_tokens))
    sections = [Section(kept, "-----Reports-----")]
    if sources:
        sections.append(Section(sources, "-----Sources-----"))
    return Context(sections)


@dataclass
class LevelTexts:
    """Per step of a level: the text it searches with, the LLM tokens its rewrite spent and
    whether the rewrite fell back to substitution."""

    texts: list[str]
    tokens: list[dict[str, int]]
    fallback: list[bool]


def level_texts(
    ctx: QueryContext,
    cfg: PankRAGConfig,
    questions: list[Question],
    plans: list[Plan],
    jobs: list[tuple[int, int]],
    asked: list[dict[int, str]],
    answers: list[dict[int, str]],
) -> LevelTexts:
    """The texts a level's steps search with: independent steps as planned; dependent ones
    rewritten with their parents' answers (one batched LLM call for the level) or with the
    answers substituted for "#k"."""
    texts = [substitute(plans[q].steps[s].text, answers[q]) for q, s in jobs]
    out = LevelTexts(texts, [{} for _ in jobs], [False] * len(jobs))
    dependent = [i for i, (q, s) in enumerate(jobs) if plans[q].steps[s].depends_on]
    if not dependent or not cfg.rewrites_by_llm():
        return out
    parents = [
        [(d + 1, asked[q][d], answers[q][d]) for d in plans[q].steps[s].depends_on]
        for q, s in (jobs[i] for i in dependent)
    ]
    done = rewrite_steps(
        ctx.llm,
        [questions[jobs[i][0]].question for i in dependent],
        parents,
        [plans[q].steps[s].text for q, s in (jobs[i] for i in dependent)],
        ctx.cfg.models.llm.parse_retries,
    )
    for i, text, spent, fell in zip(dependent, done.texts, done.tokens, done.fallback, strict=True):
        out.texts[i], out.tokens[i], out.fallback[i] = text, {"pankrag_rewrite": spent}, fell
    return out


def plan_extras(
    plan: Plan,
    scopes: list[Scope],
    levels: list[list[int]],
    asked: dict[int, str],
    answers: dict[int, str],
    found: dict[int, Found],
) -> dict:
    """What a run's extras show of one question's plan: steps, edges, levels, searches."""
    return {
        "plan_source": plan.source,
        "plan": [
            {
                "step": s + 1,
                "question": asked[s],
                "depends_on": [d + 1 for d in st.depends_on],
                "scope": scopes[s],
                "search": found[s].search,
                "answer": answers.get(s),
            }
            for s, st in enumerate(plan.steps)
        ],
        "edges": [[d + 1, s + 1] for d, s in plan.edges()],
        "levels": len(levels),
        "abstract_as_local": sum(
            sc == "abstract" and found[s].search == "local" for s, sc in enumerate(scopes)
        ),
    }
