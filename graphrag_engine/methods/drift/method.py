"""DRIFT search (Microsoft GraphRAG, 2024): a primer over the community reports most like the
question, rounds of local search on the follow-up queries it raises, and a reduce of every
intermediate answer (GraphRAG's `drift_search`, read for steps and settings).

For the whole batch at once, each step one batched LLM call across questions:

1. Expand: every question becomes a hypothetical answer laid out like a report (HyDE; the
   template a report picked by `seed`), and the reports of the leaf-most communities at
   `community_level` are ranked by cosine to it; the best `k_followups` are the primer's.
2. Primer: the reports split into `primer_folds` prompts, best first; each answers with an
   intermediate answer, a score (0-100) and follow-up queries. A question's primer answer is
   the folds' answers joined, its follow-ups all of theirs.
3. Rounds (`n_depth`): take up to `k_followups` of a question's unanswered follow-ups (in an
   order drawn by `seed`, as GraphRAG shuffles them); each gets GraphRAG's local search
   context (its own entities, relationships, reports and text units) and is answered with a
   score and further follow-ups, which join the unanswered ones.
4. Reduce: every intermediate answer, the primer's first, is the context of the final answer
   (the `drift_reduce` stage; the answer stage then sends nothing). The chunk ranking (for
   Recall@k) is the text units of the local searches, in the order they were asked.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.drift.config import DRIFTConfig
from graphrag_engine.methods.drift.prompts import (
    HYDE_STAGE,
    LOCAL_STAGE,
    PRIMER_STAGE,
    reduce_prompt,
)
from graphrag_engine.methods.needs import Part
from graphrag_engine.models.base import GenParams
from graphrag_engine.models.structured import generate_structured
from graphrag_engine.retrieve.communities import Communities, communities, report_vectors
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph
from graphrag_engine.retrieve.lines import within_budget
from graphrag_engine.retrieve.local_search import local_context, pick_entities, text_units
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.reduce import reduce_answers
from graphrag_engine.retrieve.types import Context, Retrieved, Section, StageClock

NO_DATA = "I do not know: the searches of the knowledge graph found nothing on this question."


@dataclass
class Search:
    """One question's DRIFT state: its answers so far and its unanswered follow-ups."""

    question: str
    answers: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    chunks: list[int] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)
    extra: dict = field(default_factory=lambda: {"asked": [], "failures": 0})

    def follow(self, queries: list[str]) -> None:
        """Queue follow-ups not asked or queued before (a repeated query is asked once)."""
        for query in queries:
            if query and query not in self.seen:
                self.seen.add(query)
                self.pending.append(query)

    def spend(self, stage: str, tokens: int) -> None:
        """Count an LLM call's tokens under its stage."""
        self.tokens[stage] = self.tokens.get(stage, 0) + tokens

    def heard(self, stage: str, res) -> tuple | None:
        """One structured answer: its tokens counted under `stage`, its value returned (None
        for an answer that failed after its re-asks, counted as a failure)."""
        self.spend(stage, res.tokens)
        if not res.ok:
            self.extra["failures"] += 1
            return None
        return res.value


def _pick(key: str, n: int) -> int:
    """A stable draw in [0, n) from a text (so a question's draws do not depend on its batch)."""
    return int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "big") % n


def _structured(ctx: QueryContext, stage, prompts: list, budget: int, **settings):
    """One batched structured call of a DRIFT stage."""
    return generate_structured(
        ctx.llm, prompts, stage.schema(**settings),
        GenParams(max_tokens=stage.max_tokens(budget=budget, **settings)),
        stage=stage.name, retries=ctx.cfg.models.llm.parse_retries,
    )  # fmt: skip


def expand(ctx: QueryContext, cfg: DRIFTConfig, comms: Communities, rows: list[int],
           runs: list[Search]) -> list[str]:  # fmt: skip
    """Each question's hypothetical answer shaped like a report (the question itself where
    HyDE is off or its answer failed)."""
    if not cfg.hyde:
        return [s.question for s in runs]
    width = ctx.scaled(cfg.hyde_template_tokens)
    templates = [
        ctx.head_tokens(
            comms.report_text(rows[_pick(f"{cfg.seed}\0{s.question}", len(rows))]), width
        )
        for s in runs
    ]
    prompts = [HYDE_STAGE.prompt(s.question, t) for s, t in zip(runs, templates, strict=True)]
    run = _structured(ctx, HYDE_STAGE, prompts, cfg.hyde_max_tokens)
    out = []
    for s, res in zip(runs, run.results, strict=True):
        s.spend("drift_hyde", res.tokens)  # a failed expansion searches with the question
        out.append(res.value if res.ok and res.value else s.question)
    return out


def top_reports(ctx: QueryContext, comms: Communities, rows: list[int], queries: list[str],
                k: int) -> list[np.ndarray]:  # fmt: skip
    """Per query, the k reports of `rows` nearest it by cosine, best first (ties: lower row)."""
    order = {c: i for i, c in enumerate(sorted(comms.report))}
    pool = np.asarray(rows, dtype=np.int64)
    vectors = report_vectors(ctx, comms)[[order[c] for c in rows]]
    sims = np.round(l2_normalize(np.asarray(ctx.encode_queries(queries))) @ vectors.T, 6)
    return [pool[np.lexsort((pool, -s))[:k]] for s in sims]


def prime(ctx: QueryContext, cfg: DRIFTConfig, comms: Communities, runs: list[Search],
          tops: list[np.ndarray]) -> None:  # fmt: skip
    """The primer: every question's report folds in one batched call; its answers and
    follow-ups start the question's search."""
    budget = ctx.scaled(cfg.primer_tokens)
    pairs = []
    for q, top in enumerate(tops):
        for fold in np.array_split(top, min(cfg.primer_folds, len(top))) if len(top) else []:
            texts = [ctx.head_tokens(comms.report_text(c), budget) for c in fold.tolist()]
            pairs.append((q, "\n\n".join(within_budget(ctx, texts, budget))))
    prompts = [PRIMER_STAGE.prompt(runs[q].question, r, cfg.followups) for q, r in pairs]
    run = _structured(ctx, PRIMER_STAGE, prompts, cfg.primer_max_tokens, followups=cfg.followups)
    parts: list[list[str]] = [[] for _ in runs]
    scores: list[list[int]] = [[] for _ in runs]
    for (q, _), res in zip(pairs, run.results, strict=True):
        if (value := runs[q].heard("drift_primer", res)) is None:
            continue
        answer, score, follow_ups = value
        parts[q].append(answer)
        scores[q].append(score)
        runs[q].follow(follow_ups)
    for s, top, answers, marks in zip(runs, tops, parts, scores, strict=True):
        if answers:
            s.answers.append("\n\n".join(answers))
        s.extra.update(reports=len(top), primer_score=_mean(marks))


def _mean(values: list[int]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def follow_up_round(ctx: QueryContext, cfg: DRIFTConfig, runs: list[Search], depth: int) -> bool:
    """One round: up to k_followups unanswered follow-ups of every question, each with its
    own local search context, answered in one batched call. False when none was left."""
    pairs = []
    for q, s in enumerate(runs):
        order = list(s.pending)
        random.Random(f"{cfg.seed}\0{depth}\0{s.question}").shuffle(order)
        taken = order[: cfg.k_followups]
        s.pending = order[cfg.k_followups :]
        s.extra["asked"].append(len(taken))
        pairs += [(q, query) for query in taken]
    if not pairs:
        return False
    local = cfg.local()
    g = entity_graph(ctx)
    queries = [query for _, query in pairs]
    picked = pick_entities(ctx, local, queries, ctx.encode_queries(queries))
    prompts = []
    for (q, query), ents in zip(pairs, picked, strict=True):
        chunks = text_units(ctx, local, g, ents, None)
        context, _ = local_context(ctx, local, ents, chunks)
        runs[q].chunks += chunks
        tables = "\n".join(context.texts())
        prompts.append(LOCAL_STAGE.prompt(runs[q].question, query, tables, cfg.followups))
    run = _structured(
        ctx, LOCAL_STAGE, prompts, cfg.local_max_answer_tokens, followups=cfg.followups
    )
    for (q, _), res in zip(pairs, run.results, strict=True):
        if (value := runs[q].heard("drift_local", res)) is None:
            continue
        answer, _, follow_ups = value
        runs[q].answers.append(answer)
        runs[q].follow(follow_ups)
    return True


@register(
    "drift",
    config=DRIFTConfig,
    paper="Microsoft GraphRAG (2024): DRIFT search, a report primer, follow-ups, local search",
    needs={Part.CHUNKS, Part.ENTITY_GRAPH, Part.ENTITY_VECTORS, Part.COMMUNITY_REPORTS},
)
def drift(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """DRIFT search for every question of the batch."""
    cfg: DRIFTConfig = ctx.cfg.options
    runs = [Search(q.question) for q in questions]
    comms = communities(ctx, need_reports=True)
    rows = comms.reported_at(cfg.community_level)
    with clock.stage("primer"):
        if rows:
            queries = expand(ctx, cfg, comms, rows, runs)
            prime(ctx, cfg, comms, runs, top_reports(ctx, comms, rows, queries, cfg.k_followups))
    with clock.stage("follow_ups"):
        depth = 0
        while depth < cfg.n_depth and follow_up_round(ctx, cfg, runs, depth):
            depth += 1
    with clock.stage("reduce"):
        budget = ctx.scaled(cfg.reduce_tokens)
        contexts = [
            Context([Section(kept, title="-----Intermediate answers-----")])
            if (kept := within_budget(ctx, s.answers, budget))
            else Context(preset_answer=NO_DATA)
            for s in runs
        ]
        reduced = reduce_answers(ctx, [s.question for s in runs], contexts, reduce_prompt,
                                 "drift_reduce")  # fmt: skip
    extras = [{**s.extra, "depth": depth, "pending": len(s.pending)} for s in runs]
    usage = [{**s.tokens, **r} for s, r in zip(runs, reduced, strict=True)]
    ranking = from_orders([list(dict.fromkeys(s.chunks)) for s in runs],
                          2 * ctx.cfg.retrieval.candidates)  # fmt: skip
    return Retrieved(ranking, extras, usage, clock.seconds, contexts)
