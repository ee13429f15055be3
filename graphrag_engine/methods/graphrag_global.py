"""Microsoft GraphRAG-style global search (Edge et al., 2024) over community reports.

For the whole batch at once:

1. Reports: the leaf-most reports at or below `community_level` (those at the level, and
   those above it that never split further), shuffled with `seed` and packed into batches of
   at most `batch_tokens` tokens, or, with `dynamic: true`, the reports an LLM rates relevant
   (>= `dynamic_threshold` of 10) walking down the hierarchy from the roots, all questions one
   level at a time, a relevant report giving way to its relevant children.
2. Map: every (question, report batch) prompt in one batched structured LLM call; each answer
   is a list of key points with an importance score from 0 to 100 (schema-constrained where
   the backend allows, re-asked, failures counted).
3. Reduce: every question's points with a score above 0, best first across batches, fill
   `reduce_tokens`, and the reduce prompt (its own stage, `global_reduce`, one batched call)
   writes the answer from them: GraphRAG's report-style answer for long answers, the shared
   short-answer instruction otherwise. A question left with no point gets GraphRAG's "no data"
   answer without a prompt.

Budgets are GraphRAG's (8,000 tokens of reports per map prompt, 8,000 of key points), shrunk
in proportion to a smaller answer window (graphrag_engine/retrieve/budget.py).

The index must hold community reports (`graphrag-engine index` with communities.enabled and
communities.reports); without them the query exits 2 saying so.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import Schema, generate_structured
from graphrag_engine.retrieve.communities import Communities, communities
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.lines import within_budget
from graphrag_engine.retrieve.reduce import reduce_answers as reduce_stage
from graphrag_engine.retrieve.types import Context, Retrieved, Section, StageClock

NO_DATA = "I do not know: the community reports hold nothing on this question."
POINTS_SCHEMA = {
    "type": "object",
    "properties": {
        "points": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "description": {"type": "string", "minLength": 1, "maxLength": 160},
                    "score": {"type": "integer", "minimum": 0, "maximum": 100},
                },
                "required": ["description", "score"],
                "additionalProperties": False,
            },
            "maxItems": 5,  # bounded: a constrained answer ends within map_max_tokens (300)
        }
    },
    "required": ["points"],
    "additionalProperties": False,
}
MAP_PROMPT = """Below are reports about communities of a knowledge graph. List the points from
them that help answer the question, each with an importance score from 0 (no help) to 100
(essential). Reply with one JSON object of this form and nothing else (an empty list when the
reports do not help):
{format}

Reports:
{reports}

Question: {question}
JSON:"""
RATE_SCHEMA = {
    "type": "object",
    "properties": {"rating": {"type": "integer", "minimum": 0, "maximum": 10}},
    "required": ["rating"],
    "additionalProperties": False,
}
RATE_PROMPT = """How relevant is this community report to the question, from 0 (unrelated) to 10
(answers it)? Reply with one JSON object of this form and nothing else: {format}

Report:
{report}

Question: {question}
JSON:"""


@dataclass
class GraphRAGGlobalConfig:
    """GraphRAG's global search settings (its 8,000-token map batches and reduce context)."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "batch_tokens": "8,000 (GraphRAG's code)",
        "reduce_tokens": "8,000 (GraphRAG's code)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "batch_tokens": ">= 1",
        "reduce_tokens": ">= 1",
        "map_max_tokens": ">= 1",
        "dynamic_threshold": "[0, 10]",
    }

    community_level: int = 2
    """Reports at this level (the deepest the index has when it has fewer)."""
    batch_tokens: int = 8000
    """Report tokens per map prompt."""
    reduce_tokens: int = 8000
    """Tokens of key points in the reduce prompt."""
    map_max_tokens: int = 300
    """Completion tokens of one map answer (its rated key points)."""
    dynamic: bool = False
    """Pick reports by LLM relevance ratings down the hierarchy instead of one level."""
    dynamic_threshold: int = 1
    """dynamic: reports rated below this (0-10) are dropped with their subtrees."""
    seed: int = 86
    """Shuffle of the reports before batching (GraphRAG shuffles them too)."""

    def context_budget(self) -> int:
        """Published size of the largest prompt context (a map batch or the reduce points)."""
        return max(self.batch_tokens, self.reduce_tokens)

    def unseen_stages(self) -> list[tuple[str, int, int | None, str]]:
        """The reduce step a dry run cannot count (its points come from the map answers); it
        writes the answers, so its budget is the answer's (None)."""
        return [("global_reduce", 1, None, "one reduce prompt per question with key points")]

    def llm_use(self) -> str:
        """The map step needs the LLM even with --retrieval-only."""
        return "method 'graphrag_global'"


POINTS = Schema(
    POINTS_SCHEMA, lambda v: [(p["description"].strip(), p["score"]) for p in v["points"]]
)
"""The map answer: (description, 0-100 importance) key points."""
RATING = Schema(RATE_SCHEMA, lambda v: v["rating"])
"""The dynamic selection's answer: a report's 0-10 relevance."""

RATE_STAGE = structured_stage(
    "global_rate",
    about="GraphRAG global search's dynamic selection: one report's relevance to a question, 0-10",
    prompt=lambda report, question: RATE_PROMPT.format(
        report=report, question=question, format=RATING.describe()
    ),
    schema=RATING,
    max_tokens=16,
)
MAP_STAGE = structured_stage(
    "global_map",
    about="GraphRAG global search's map step: rated points of a batch of reports for a question",
    prompt=lambda reports, question: MAP_PROMPT.format(
        reports=reports, question=question, format=POINTS.describe()
    ),
    schema=POINTS,
    max_tokens=lambda budget: budget,
    budget=300,
)


def _report(comms: Communities, c: int) -> str:
    title, text, _ = comms.report[c]
    return f"# {title}\n{text}"


def _dynamic(
    ctx: QueryContext, comms: Communities, texts: list[str], cfg: GraphRAGGlobalConfig
) -> tuple[list[list[int]], list[int]]:
    """Per question, the deepest reports rated relevant walking down from the roots (a
    relevant report gives way to its relevant children), and the rating tokens; every level
    of every question is one batched rating call."""
    frontier = [[c for c in comms.roots() if c in comms.report] for _ in texts]
    chosen: list[dict[int, None]] = [{} for _ in texts]
    tokens = [0] * len(texts)
    while any(frontier):
        pairs = [(q, c) for q, cs in enumerate(frontier) for c in cs]
        prompts = [RATE_STAGE.prompt(_report(comms, c), texts[q]) for q, c in pairs]
        run = generate_structured(
            ctx.llm, prompts, RATE_STAGE.schema(), GenParams(max_tokens=RATE_STAGE.max_tokens()),
            stage="global_rate", retries=ctx.cfg.models.llm.parse_retries,
        )  # fmt: skip
        frontier = [[] for _ in texts]
        for (q, c), res in zip(pairs, run.results, strict=True):
            tokens[q] += res.tokens
            if not res.ok or res.value < cfg.dynamic_threshold:
                continue
            chosen[q][c] = None
            chosen[q].pop(comms.parent[c], None)
            frontier[q].extend(k for k in comms.children.get(c, []) if k in comms.report)
    return [list(c) for c in chosen], tokens


def _batches(
    ctx: QueryContext, comms: Communities, rows: list[int], cfg: GraphRAGGlobalConfig
) -> list[str]:
    """The reports shuffled and packed into prompts of at most `batch_tokens` tokens; a report
    longer than that alone is cut to it (an imported GPT report can be, and a prompt past the
    model's window fails)."""
    rows = list(rows)
    random.Random(cfg.seed).shuffle(rows)
    texts = [_report(comms, c) for c in rows]
    budget = ctx.scaled(cfg.batch_tokens)
    out, part, used = [], [], 0
    for text, n in zip(texts, ctx.count_tokens(texts), strict=True):
        if n > budget:
            text, n = ctx.head_tokens(text, budget), budget
        if part and used + n > budget:
            out.append("\n\n".join(part))
            part, used = [], 0
        part.append(text)
        used += n
    if part:
        out.append("\n\n".join(part))
    return out


def reduce_points(ctx: QueryContext, points: list[tuple[str, int]], budget: int) -> Context:
    """GraphRAG's reduce: the points scored above 0, best first (ties in map order), as many
    as fit `budget` tokens; no such point gives the "no data" answer, with no prompt."""
    ranked = sorted((p for p in points if p[1] > 0), key=lambda p: -p[1])
    kept = within_budget(ctx, [f"(importance {s}) {d}" for d, s in ranked], budget)
    if not kept:
        return Context(preset_answer=NO_DATA)
    return Context([Section(kept, title="-----Key points-----")])


REDUCE_SYSTEM = """You answer a question from key points that analysts drew from the community
reports of a knowledge graph; each point carries its importance (0-100). Write a complete,
well-organised answer of a few paragraphs built on the most important points, merge points
that say the same, say what the points do not cover, and add nothing they do not support.
Answer in the language of the question."""


def reduce_prompt(question: str, points: list[str] | None, options=None) -> list[dict]:
    """GraphRAG's reduce prompt, in our words: the ranked key points, then the question."""
    body = "\n".join(points or []) or "(none)"
    user = f"Key points:\n{body}\n\nQuestion: {question}\nAnswer:"
    return [{"role": "system", "content": REDUCE_SYSTEM}, {"role": "user", "content": user}]


def reduce_answers(
    ctx: QueryContext, questions: list[str], contexts: list[Context]
) -> list[dict[str, int]]:
    """The reduce step as its own stage (`global_reduce`): every question with key points
    answered from them in one batched call, GraphRAG's prompt for long answers."""
    return reduce_stage(ctx, questions, contexts, reduce_prompt, "global_reduce")


@register(
    "graphrag_global",
    config=GraphRAGGlobalConfig,
    paper="Microsoft GraphRAG (Edge et al., 2024): global search, map-reduce over community reports",
    needs={Part.ENTITY_GRAPH, Part.COMMUNITY_REPORTS},
)
def graphrag_global(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Map-reduce over community reports for every question of the batch."""
    cfg: GraphRAGGlobalConfig = ctx.cfg.options
    texts = [q.question for q in questions]
    comms = communities(ctx, need_reports=True)
    with clock.stage("select_reports"):
        rate_tokens = [0] * len(texts)
        if cfg.dynamic:
            rows, rate_tokens = _dynamic(ctx, comms, texts, cfg)
        else:
            rows = [comms.reported_at(cfg.community_level)] * len(texts)
    with clock.stage("map"):
        batches = [_batches(ctx, comms, r, cfg) for r in rows]
        pairs = [(q, b) for q, bs in enumerate(batches) for b in bs]
        prompts = [MAP_STAGE.prompt(b, texts[q]) for q, b in pairs]
        run = generate_structured(
            ctx.llm, prompts, MAP_STAGE.schema(),
            GenParams(max_tokens=MAP_STAGE.max_tokens(budget=cfg.map_max_tokens)),
            stage="global_map", retries=ctx.cfg.models.llm.parse_retries,
        )  # fmt: skip
    points: list[list[tuple[str, int]]] = [[] for _ in texts]
    failed = [0] * len(texts)
    tokens = [0] * len(texts)
    for (q, _), res in zip(pairs, run.results, strict=True):
        tokens[q] += res.tokens
        if res.ok:
            points[q].extend(res.value)
        else:
            failed[q] += 1
    contexts, extras = [], []
    with clock.stage("reduce"):
        for q in range(len(texts)):
            contexts.append(reduce_points(ctx, points[q], ctx.scaled(cfg.reduce_tokens)))
            extras.append(
                {
                    "reports": len(rows[q]),
                    "map_prompts": len(batches[q]),
                    "map_failures": failed[q],
                    "points": len(points[q]),
                    "dynamic": cfg.dynamic,
                }
            )
        reduce_tokens = reduce_answers(ctx, texts, contexts)
    usage = [
        {"global_map": t, **({"global_rate": r} if cfg.dynamic else {}), **red}
        for t, r, red in zip(tokens, rate_tokens, reduce_tokens, strict=True)
    ]
    return Retrieved(None, extras, usage, clock.seconds, contexts)
