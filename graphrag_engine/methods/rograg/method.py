"""ROGRAG (2025): multi-stage retrieval (logic form, then dual-level) with a verifier deciding
whether a stage's context can answer, and a preset refusal when none can.

For the whole batch at once:

0. Question analysis (Figure 2, `analysis.py`): one batched call reads each question's intent
   and domain; a message that asks nothing (the intent slot's not_a_question) is refused
   without retrieval (`analysis: false` skips the call).
1. Keys (3.2): low-level (entity) and high-level (relation) keys of every question, from one
   batched structured LLM call; `expand_low_keys` adds the question's named entities as more
   low-level keys, `long_query` adds the question itself as a high-level key (the paper's two
   levers, Figure 1 e).
2. Dual-level retrieval (6.1, Table 5): low keys matched to entities and high keys to
   relations, merged into nodes, edges and chunk references without duplicates. `match:
   fuzzy` (the paper's) embeds a level's keys joined into one query; `exact` matches each key
   on its own; `name` (an engine option) matches entity names exactly.
3. Logic form (Algorithm 2): one batched structured call turns each question into steps over
   the operator set (graphrag_engine/methods/rograg/logic_forms.py); retrieve steps of one level of every
   question are answered in one call from their own dual-level match; compare, arithmetic,
   count, union and filter run in plain Python. The history is the stage's context, with the
   passages its lookups found chosen by Algorithm 1's add / remove loop: grow and prune the set
   while its centroid moves closer to the question (`select`, graphrag_engine/kernels/
   selection.py), at most `select_max` passages.
4. Verification (Algorithm 4): `check: argument` asks, before answering, one batched verdict
   per question: does this stage's context support an answer? An unsupported question moves
   down the chain (`stages`: logic_form, then dual_level); `check: result` answers first and
   asks whether the context supports that answer (Table 7's alternative); `none` keeps the
   first stage. A question no stage supports gets `refusal` with no generation call.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.selection import stepwise_select
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import KEYED_GRAPH_SEARCH
from graphrag_engine.methods.rograg.analysis import analyse
from graphrag_engine.methods.rograg.config import ROGRAGConfig
from graphrag_engine.methods.rograg.dual_level import Matched, match_keys
from graphrag_engine.methods.rograg.logic_forms import (
    LogicForm,
    execute,
    logic_form_schema,
    lookups,
)
from graphrag_engine.methods.rograg.verify import verify
from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import generate_structured
from graphrag_engine.retrieve.answer import answer_batch
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.keywords import llm_keywords, ner_keywords
from graphrag_engine.retrieve.lines import (
    budgeted_sections,
    chunk_lines,
    entity_lines,
    relation_lines,
    within_budget,
)
from graphrag_engine.retrieve.linking import query_mentions
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.types import (
    Context,
    Retrieved,
    Section,
    StageClock,
    stage_tokens,
    summed_tokens,
)

PLAN_PROMPT = """Turn the question into steps over these operators: retrieve (look up one fact;
write "#k" for step k's result), filter (keep the items of one earlier list whose value, asked
per item with "{{item}}" in the query, is greater / less / earlier / later than or equal to
"bound"), count, union, sum, difference (of earlier steps), compare (which of two earlier
steps' values is greater / less / earlier / later, or whether they are equal; give each step a
short "label" naming what its value is about). The last step answers the question. Reply with
one JSON object of this form and nothing else:
{format}

Example. Question: Which bridge opened first, the Arlen Bridge or the Coldwater Viaduct?
JSON: {{"steps": [{{"operator": "retrieve", "query": "When did the Arlen Bridge open?",
"inputs": [], "relation": "none", "bound": "", "label": "Arlen Bridge"}}, {{"operator":
"retrieve", "query": "When did the Coldwater Viaduct open?", "inputs": [], "relation": "none",
"bound": "", "label": "Coldwater Viaduct"}}, {{"operator": "compare", "query": "Which opened
first?", "inputs": [1, 2], "relation": "earlier", "bound": "", "label": "opened first"}}]}}

Question: {question}
JSON:"""


@register(
    "rograg",
    config=ROGRAGConfig,
    paper="ROGRAG (2025): logic-form and dual-level retrieval, argument checking, refusal",
    needs=KEYED_GRAPH_SEARCH,
    needs_note="descriptions when an LLM extracted",
)
def rograg(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Analyse every question, then run those that ask something through the stage chain,
    the verifier choosing where each stops."""
    cfg: ROGRAGConfig = ctx.cfg.options
    texts = [q.question for q in questions]
    analysis_tokens: list[dict[str, int]] = [{} for _ in texts]
    chain_tokens: list[dict[str, int]] = [{} for _ in texts]
    intents: list[str | None] = [None] * len(texts)
    domains: list[str | None] = [None] * len(texts)
    if cfg.analysis:
        with clock.stage("analysis"):
            seen = analyse(ctx.llm, texts, ctx.cfg.models.llm.parse_retries)
            intents, domains = seen.intents, seen.domains
            analysis_tokens = stage_tokens("rograg_analysis", seen.tokens)
    contexts = [Context(preset_answer=cfg.refusal) for _ in texts]
    orders: list[list[int]] = [[] for _ in texts]
    extras = [
        {"stage": "refused", "intent": i, "domain": d}
        for i, d in zip(intents, domains, strict=True)
    ]
    asking = [q for q, i in enumerate(intents) if i != "not_a_question"]
    if asking:
        chain = run_chain(ctx, cfg, [texts[q] for q in asking], clock)
        for q, (context, order, extra, spent) in zip(asking, zip(*chain, strict=True), strict=True):
            contexts[q], orders[q], chain_tokens[q] = context, order, spent
            extras[q].update(extra)
    tokens = summed_tokens(analysis_tokens, chain_tokens)
    depth = 2 * ctx.cfg.retrieval.candidates
    return Retrieved(from_orders(orders, depth), extras, tokens, clock.seconds, contexts)


def run_chain(
    ctx: QueryContext,
    cfg: ROGRAGConfig,
    texts: list[str],
    clock: StageClock,
) -> tuple[list[Context], list[list[int]], list[dict], list[dict[str, int]]]:
    """Keys, dual-level match, logic forms and verdicts of a batch of questions: per question
    its context (a refusal where no stage is supported), chunk order, extras and LLM tokens."""
    with clock.stage("keys"):
        kw = llm_keywords(ctx, texts) if cfg.keys == "llm" else ner_keywords(ctx, texts)
        low, high = kw.low, kw.high
        if cfg.expand_low_keys:
            low = [
                list(dict.fromkeys([*k, *m]))
                for k, m in zip(low, query_mentions(ctx, texts), strict=True)
            ]
        if cfg.long_query:
            high = [[*k, t] for k, t in zip(high, texts, strict=True)]
    with clock.stage("dual_level"):
        asks = texts if cfg.chunk_pick == "vector" else None
        matched = match_keys(ctx, low, high, cfg.top_ks(), cfg.floor, cfg.match, asks)
    stage_contexts: dict[str, list[Context]] = {
        "dual_level": [dual_context(ctx, cfg, m) for m in matched]
    }
    stage_chunks: dict[str, list[list[int]]] = {"dual_level": [m.chunks for m in matched]}
    forms: list[LogicForm | None] = [None] * len(texts)
    form_tokens: list[dict[str, int]] = [{} for _ in texts]
    if "logic_form" in cfg.stages:
        with clock.stage("logic_form"):
            planned = logic_form_stage(ctx, cfg, texts)
            forms, form_tokens = planned.forms, planned.tokens
            stage_contexts["logic_form"], stage_chunks["logic_form"] = (
                planned.contexts,
                planned.chunks,
            )
    with clock.stage("verify"):
        verdicts = verify(ctx, cfg.stages, cfg.check, texts, stage_contexts)
    contexts, orders, extras = [], [], []
    for q, stage in enumerate(verdicts.chosen):
        answer = verdicts.answers[q]
        if stage is None:
            contexts.append(Context(preset_answer=cfg.refusal))
        elif answer is not None:  # result checking answered already
            contexts.append(Context(stage_contexts[stage][q].sections, preset_answer=answer))
        else:
            contexts.append(stage_contexts[stage][q])
        orders.append(stage_chunks[stage][q] if stage else [])
        extras.append(
            {
                "stage": stage or "refused",
                "keys_fallback": kw.fallback[q],
                "low_keys": low[q],
                "high_keys": high[q],
                "logic_form": None if forms[q] is None else [s.operator for s in forms[q].steps],
                "entities": len(matched[q].entities),
                "relations": len(matched[q].relations),
            }
        )
    tokens = summed_tokens(stage_tokens("keys", kw.tokens), form_tokens, verdicts.tokens)
    return contexts, orders, extras, tokens


def dual_context(ctx: QueryContext, cfg: ROGRAGConfig, m: Matched) -> Context:
    """Nodes, edges and chunk texts as three whole sections under their budgets."""
    parts = [
        ("Entities", entity_lines(ctx, m.entities), ctx.scaled(cfg.entity_tokens)),
        ("Relations", relation_lines(ctx, m.relations), ctx.scaled(cfg.relation_tokens)),
        ("Sources", chunk_lines(ctx, m.chunks), ctx.scaled(cfg.chunk_tokens)),
    ]
    return Context(budgeted_sections(ctx, parts))


@dataclass
class Planned:
    """The logic-form stage's outcome per question: its plan (None: none validated), the
    history as context, the chunks its lookups matched in step order, and its LLM tokens."""

    forms: list[LogicForm | None]
    contexts: list[Context]
    chunks: list[list[int]]
    tokens: list[dict[str, int]]


def logic_form_stage(ctx: QueryContext, cfg: ROGRAGConfig, texts: list[str]) -> Planned:
    """Plans (one batched call) and their execution. A question without a valid plan gets an
    empty context and no chunks, so the verifier moves it on."""
    prompts = [LOGIC_FORM_STAGE.prompt(t, cfg.max_steps) for t in texts]
    run = generate_structured(
        ctx.llm, prompts, LOGIC_FORM_STAGE.schema(max_steps=cfg.max_steps),
        GenParams(max_tokens=LOGIC_FORM_STAGE.max_tokens(max_steps=cfg.max_steps)),
        stage="logic_form", retries=ctx.cfg.models.llm.parse_retries,
    )  # fmt: skip
    tokens = stage_tokens("logic_form", [r.tokens for r in run.results])
    forms = [r.value if r.ok else None for r in run.results]
    planned = [f for f in forms if f is not None]

    looked_up: dict[str, tuple[list[int], int]] = {}  # lookup text -> (chunks, LLM tokens)

    def answer(subs: list[str]) -> list[str]:
        found = match_keys(
            ctx, [[s] for s in subs], [[s] for s in subs], cfg.top_ks(), cfg.floor, cfg.match
        )
        done = answer_batch(
            ctx.llm, ctx.count_tokens, subs, [dual_context(ctx, cfg, m) for m in found],
            ctx.context_tokens, cfg.step_answer_tokens, stage="logic_step",
        )  # fmt: skip
        for sub, m, t in zip(subs, found, done.tokens, strict=True):
            looked_up[sub] = (m.chunks, sum(t.values()))
        return done.answers

    histories = iter(execute(planned, answer))
    contexts, chunks = [], []
    found = []
    for q, f in enumerate(forms):
        hist = next(histories) if f is not None else None
        asked = lookups(f, hist) if hist else []
        found.append(list(dict.fromkeys(c for a in asked for c in looked_up[a][0])))
        tokens[q]["logic_step"] = sum(looked_up[a][1] for a in asked)
        lines = hist.lines() if hist else []
        contexts.append(
            Context([Section(lines, "-----Reasoning steps-----", True)] if lines else [])
        )
    picked = select_passages(ctx, cfg, texts, found) if cfg.select else [[]] * len(texts)
    for context, cands, kept in zip(contexts, found, picked, strict=True):
        if context.sections and kept:
            sources = within_budget(ctx, chunk_lines(ctx, kept), ctx.scaled(cfg.chunk_tokens))
            context.sections.append(Section(sources, "-----Sources-----"))
        chunks.append([*kept, *(c for c in cands if c not in set(kept))])
    return Planned(forms, contexts, chunks, tokens)


def select_passages(
    ctx: QueryContext, cfg: ROGRAGConfig, texts: list[str], found: list[list[int]]
) -> list[list[int]]:
    """Algorithm 1 over each logic form's passages: the set whose centroid is nearest the
    question, grown and pruned one passage at a time (one query embedding call)."""
    asked = [q for q, cands in enumerate(found) if cands]
    out: list[list[int]] = [[] for _ in texts]
    if not asked:
        return out
    queries = l2_normalize(ctx.encode_queries([texts[q] for q in asked]))
    vectors = ctx.vectors("chunk_vectors")
    for q, vec in zip(asked, queries, strict=True):
        cands = found[q]
        keep = stepwise_select(l2_normalize(vectors[cands]), vec, cfg.select_max)
        out[q] = [cands[i] for i in keep]
    return out


def logic_form_prompt(question: str, max_steps: int) -> str:
    """The logic-form prompt of one question, its format line drawn from the schema."""
    return PLAN_PROMPT.format(format=logic_form_schema(max_steps).describe(), question=question)


def logic_form_max_tokens(max_steps: int) -> int:
    """Completion budget of a plan of at most `max_steps` steps (about 80 tokens a step)."""
    return 48 + 80 * max_steps


LOGIC_FORM_STAGE = structured_stage(
    "logic_form",
    about="ROGRAG's logic form: a question as a plan of retrieval and operator steps",
    prompt=logic_form_prompt,
    schema=lambda max_steps: logic_form_schema(max_steps),
    max_tokens=logic_form_max_tokens,
    max_steps=ROGRAGConfig.max_steps,
)
