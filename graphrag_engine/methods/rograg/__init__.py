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

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from graphrag_engine.errors import ConfigError
from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.selection import stepwise_select
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import KEYED_GRAPH_SEARCH
from graphrag_engine.methods.rograg.analysis import analyse
from graphrag_engine.methods.rograg.dual_level import Matched, match_keys
from graphrag_engine.methods.rograg.logic_forms import (
    LogicForm,
    execute,
    logic_form_schema,
    lookups,
)
from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import Schema, generate_structured, json_object
from graphrag_engine.retrieve.answer import answer_batch, fit_context
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
from graphrag_engine.retrieve.types import Context, Retrieved, Section, StageClock

Stage = Literal["logic_form", "dual_level"]


@dataclass
class ROGRAGConfig:
    """ROGRAG's stages, matching levers, verifier and refusal text."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "keys": "llm (3.2)",
        "check": "argument (6.3, Table 7)",
        "match": "fuzzy (6.1, Table 5)",
        "low_top_k": "6 (authors' code)",
        "high_top_k": "5 (authors' code)",
        "floor": "0.2 (authors' code)",
        "expand_low_keys": "true (Figure 1 e)",
        "entity_tokens": "8,000 (Figure 1 d)",
        "relation_tokens": "8,000 (Figure 1 d)",
        "chunk_tokens": "12,000 (Figure 1 d)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "low_top_k": ">= 1",
        "high_top_k": ">= 1",
        "floor": "[-1, 1]",
        "max_steps": ">= 1",
        "step_answer_tokens": ">= 1",
        "select_max": ">= 1",
    }

    stages: list[Stage] = field(default_factory=lambda: ["logic_form", "dual_level"])
    """The fallback chain, tried in order."""
    check: Literal["argument", "result", "none"] = "argument"
    """argument: a verdict on the context before answering; result: answer, then check it; none: first stage with a context."""
    keys: Literal["llm", "ner"] = "llm"
    """Where the dual-level keys come from: one batched LLM call (the paper), or the
    question's named entities (low) and the question itself (high), LLM-free."""
    refusal: str = "I cannot answer this from the knowledge base."
    """The answer given when no stage's context is judged to support one."""
    analysis: bool = True
    """Analyse each question's intent and domain first (one batched call); a message that asks
    nothing is refused without retrieval."""
    match: Literal["fuzzy", "exact", "name"] = "fuzzy"
    """fuzzy: a level's keys joined into one query (the paper); exact: each key matched on its
    own; name: low keys by normalized entity name. Matches are the top k above floor."""
    low_top_k: int = 6
    """Entities per low-level key (the authors' public code: 6; the paper gives none)."""
    high_top_k: int = 5
    """Relations per high-level key (the authors' public code: 5)."""
    chunk_pick: Literal["vector", "found"] = "vector"
    """Order of the dual-level chunk references: cosine to the question (the VECTOR pick of
    newer LightRAG releases), or the order the keys found them (close to the authors' code)."""
    floor: float = 0.2
    """Least cosine of a match (the authors' public code keeps matches scoring 0.2 or more)."""
    expand_low_keys: bool = True
    """Add the question's named entities as more low-level keys (Figure 1 e, Table 5: part of
    the paper's final system)."""
    long_query: bool = False
    """Add the question itself as a high-level key (the paper's other lever)."""
    max_steps: int = 5
    """Most steps of one logic form."""
    step_answer_tokens: int = 32
    """Completion tokens of one retrieve step's answer."""
    entity_tokens: int = 8000
    """Token budget of the dual-level Entities section (Figure 1 d: 8k for nodes)."""
    relation_tokens: int = 8000
    """Token budget of the dual-level Relations section (8k for edges)."""
    chunk_tokens: int = 12000
    """Token budget of the Sources section (12k for chunks)."""
    select: bool = True
    """Choose the logic form's passages by Algorithm 1's add / remove loop (false: none)."""
    select_max: int = 8
    """Most passages the selection keeps for a logic form's context."""

    def validate(self, where: str) -> None:
        """A non-empty chain of known stages, positive sizes, a floor in [-1, 1]."""
        if not self.stages or any(s not in ("logic_form", "dual_level") for s in self.stages):
            raise ConfigError(f"{where}: rograg.stages lists logic_form and/or dual_level")
        if (
            min(
                self.low_top_k,
                self.high_top_k,
                self.max_steps,
                self.entity_tokens,
                self.chunk_tokens,
                self.select_max,
            )
            < 1
        ):
            raise ConfigError(f"{where}: rograg sizes must be >= 1")
        if not -1 <= self.floor <= 1:
            raise ConfigError(f"{where}: rograg.floor must lie in [-1, 1]")

    def top_ks(self) -> tuple[int, int]:
        """Entities per low key and relations per high key, as `match_keys` takes them."""
        return self.low_top_k, self.high_top_k

    def context_budget(self) -> int:
        """Published total of the dual-level context (8k + 8k + 12k)."""
        return self.entity_tokens + self.relation_tokens + self.chunk_tokens

    def llm_use(self) -> str | None:
        """LLM keys, logic forms and verdicts need the LLM even with --retrieval-only."""
        if (
            self.keys == "ner"
            and self.stages == ["dual_level"]
            and self.check == "none"
            and not self.analysis
        ):
            return None
        return "method 'rograg'"

    def unseen_stages(self) -> list[tuple[str, int, int, str]]:
        """Stages a dry run cannot count, since their prompts come from the logic forms it
        cannot make: (stage, most prompts per question, completion budget, note)."""
        if "logic_form" not in self.stages:
            return []
        rows = [
            (
                "logic_step", self.max_steps, self.step_answer_tokens,
                "one lookup per retrieve step; a filter step's lookups, one per item of the "
                "list it filters, come on top",
            )
        ]  # fmt: skip
        if self.check != "none":
            rows.append(
                (
                    "verify_logic_form", 1, VERIFY_STAGE.max_tokens(),
                    "one verdict on each logic form's context, on top of the verify row",
                )
            )  # fmt: skip
        return rows


VERDICT = Schema(json_object({"supported": {"type": "boolean"}}), lambda v: bool(v["supported"]))
ARGUMENT_PROMPT = """Can the question be answered from the context below alone? Answer true only
when the context states what the answer needs. Reply with one JSON object of this form and
nothing else: {format}

Context:
{context}

Question: {question}
JSON:"""
RESULT_PROMPT = """Does the context below support this answer to the question? Reply with one
JSON object of this form and nothing else: {format}

Context:
{context}

Question: {question}
Answer: {answer}
JSON:"""
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
    tokens: list[dict[str, int]] = [{} for _ in texts]
    intents: list[str | None] = [None] * len(texts)
    domains: list[str | None] = [None] * len(texts)
    if cfg.analysis:
        with clock.stage("analysis"):
            seen = analyse(ctx.llm, texts, ctx.cfg.models.llm.parse_retries)
            intents, domains = seen.intents, seen.domains
            _add(tokens, "rograg_analysis", seen.tokens)
    contexts = [Context(preset_answer=cfg.refusal) for _ in texts]
    orders: list[list[int]] = [[] for _ in texts]
    extras = [
        {"stage": "refused", "intent": i, "domain": d}
        for i, d in zip(intents, domains, strict=True)
    ]
    asking = [q for q, i in enumerate(intents) if i != "not_a_question"]
    if asking:  # the token dicts are shared, so the chain's counts land on each question
        chain = run_chain(ctx, cfg, [texts[q] for q in asking], [tokens[q] for q in asking], clock)
        for q, (context, order, extra) in zip(asking, zip(*chain, strict=True), strict=True):
            contexts[q], orders[q] = context, order
            extras[q].update(extra)
    depth = 2 * ctx.cfg.retrieval.candidates
    return Retrieved(from_orders(orders, depth), extras, tokens, clock.seconds, contexts)


def run_chain(
    ctx: QueryContext,
    cfg: ROGRAGConfig,
    texts: list[str],
    tokens: list[dict[str, int]],
    clock: StageClock,
) -> tuple[list[Context], list[list[int]], list[dict]]:
    """Keys, dual-level match, logic forms and verdicts of a batch of questions: per question
    its context (a refusal where no stage is supported), chunk order and extras."""
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
        _add(tokens, "keys", kw.tokens)
    with clock.stage("dual_level"):
        asks = texts if cfg.chunk_pick == "vector" else None
        matched = match_keys(ctx, low, high, cfg.top_ks(), cfg.floor, cfg.match, asks)
    stage_contexts: dict[str, list[Context]] = {
        "dual_level": [dual_context(ctx, cfg, m) for m in matched]
    }
    stage_chunks: dict[str, list[list[int]]] = {"dual_level": [m.chunks for m in matched]}
    forms: list[LogicForm | None] = [None] * len(texts)
    if "logic_form" in cfg.stages:
        with clock.stage("logic_form"):
            forms, stage_contexts["logic_form"], stage_chunks["logic_form"] = logic_form_stage(
                ctx, cfg, texts, tokens
            )
    with clock.stage("verify"):
        chosen, answers = verify(ctx, cfg, texts, stage_contexts, tokens)
    contexts, orders, extras = [], [], []
    for q, stage in enumerate(chosen):
        if stage is None:
            contexts.append(Context(preset_answer=cfg.refusal))
        elif answers[q] is not None:  # result checking answered already
            contexts.append(Context(stage_contexts[stage][q].sections, preset_answer=answers[q]))
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
    return contexts, orders, extras


def dual_context(ctx: QueryContext, cfg: ROGRAGConfig, m: Matched) -> Context:
    """Nodes, edges and chunk texts as three whole sections under their budgets."""
    parts = [
        ("Entities", entity_lines(ctx, m.entities), ctx.scaled(cfg.entity_tokens)),
        ("Relations", relation_lines(ctx, m.relations), ctx.scaled(cfg.relation_tokens)),
        ("Sources", chunk_lines(ctx, m.chunks), ctx.scaled(cfg.chunk_tokens)),
    ]
    return Context(budgeted_sections(ctx, parts))


def logic_form_stage(
    ctx: QueryContext, cfg: ROGRAGConfig, texts: list[str], tokens: list[dict[str, int]]
) -> tuple[list[LogicForm | None], list[Context], list[list[int]]]:
    """Plans (one batched call) and their execution: per question its plan, the history as
    context and the chunks its lookups matched, in step order. A question without a valid plan
    gets an empty context and no chunks, so the verifier moves it on."""
    prompts = [LOGIC_FORM_STAGE.prompt(t, cfg.max_steps) for t in texts]
    run = generate_structured(
        ctx.llm, prompts, LOGIC_FORM_STAGE.schema(max_steps=cfg.max_steps),
        GenParams(max_tokens=LOGIC_FORM_STAGE.max_tokens(max_steps=cfg.max_steps)),
        stage="logic_form", retries=ctx.cfg.models.llm.parse_retries,
    )  # fmt: skip
    _add(tokens, "logic_form", [r.tokens for r in run.results])
    forms = [r.value if r.ok else None for r in run.results]
    planned = [f for f in forms if f is not None]

    looked_up: dict[str, tuple[list[int], int]] = {}  # lookup text -> (chunks, LLM tokens)

    def answer(subs: list[str]) -> list[str]:
        found = match_keys(
            ctx, [[s] for s in subs], [[s] for s in subs], cfg.top_ks(), cfg.floor, cfg.match
        )
        done = answer_batch(
            ctx.llm, ctx.tokenizer, subs, [dual_context(ctx, cfg, m) for m in found],
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
    return forms, contexts, chunks


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


def verify(ctx, cfg, texts, stage_contexts, tokens) -> tuple[list[str | None], list[str | None]]:
    """Per question, the first stage of the chain the verifier accepts (None: refuse) and, for
    result checking, the answer it accepted; one batched verdict call per stage."""
    n = len(texts)
    chosen: list[str | None] = [None] * n
    answers: list[str | None] = [None] * n
    pending = list(range(n))
    for stage in cfg.stages:
        contexts = stage_contexts[stage]
        ask = [q for q in pending if contexts[q].sections]
        if cfg.check == "none":
            for q in ask:
                chosen[q] = stage
        elif ask:
            checked = _check(ctx, cfg, [texts[q] for q in ask], [contexts[q] for q in ask])
            for q, (supported, answer, spent) in zip(ask, checked, strict=True):
                for key, count in spent.items():
                    tokens[q][key] = tokens[q].get(key, 0) + count
                if supported:
                    chosen[q], answers[q] = stage, answer
        pending = [q for q in pending if chosen[q] is None]
    return chosen, answers


def _check(
    ctx: QueryContext, cfg: ROGRAGConfig, questions: list[str], contexts: list[Context]
) -> list[tuple[bool, str | None, dict[str, int]]]:
    """Per question: whether the verdict says the context supports an answer, the answer
    result checking gave first (None for argument checking), and the LLM tokens spent."""
    gen = ctx.cfg.generation
    given: list[str | None] = [None] * len(questions)
    spent: list[dict[str, int]] = [{} for _ in questions]
    if cfg.check == "result":
        done = answer_batch(
            ctx.llm, ctx.tokenizer, questions, contexts, ctx.context_tokens, gen.max_tokens
        )
        given = list(done.answers)
        spent = [{"result_answer": sum(t.values())} for t in done.tokens]
    prompts = [
        _verdict_prompt(ctx, q, c, a) for q, c, a in zip(questions, contexts, given, strict=True)
    ]
    run = generate_structured(
        ctx.llm, prompts, VERIFY_STAGE.schema(),
        GenParams(max_tokens=VERIFY_STAGE.max_tokens()), stage="verify",
        retries=ctx.cfg.models.llm.parse_retries,
    )  # fmt: skip
    return [
        (bool(r.ok and r.value), a, s | {"verify": r.tokens})
        for r, a, s in zip(run.results, given, spent, strict=True)
    ]


def _verdict_prompt(ctx: QueryContext, question: str, context: Context, answer: str | None) -> str:
    """The verdict prompt over the context the answer prompt would carry: cut, like it, to
    `generation.max_context_tokens` (a verdict on more than the answer sees would be moot, and
    could overflow the model's window)."""
    cfg: ROGRAGConfig = ctx.cfg.options
    fitted = fit_context(context, ctx.tokenizer, ctx.context_tokens)
    return VERIFY_STAGE.prompt(cfg.check, question, "\n".join(fitted.texts()), answer)


def logic_form_prompt(question: str, max_steps: int) -> str:
    """The logic-form prompt of one question, its format line drawn from the schema."""
    return PLAN_PROMPT.format(format=logic_form_schema(max_steps).describe(), question=question)


def logic_form_max_tokens(max_steps: int) -> int:
    """Completion budget of a plan of at most `max_steps` steps (about 80 tokens a step)."""
    return 48 + 80 * max_steps


def verdict_prompt(check: str, question: str, context: str, answer: str | None = None) -> str:
    """The verifier's prompt: argument checking asks whether the context can answer the
    question; result checking whether it supports the given answer."""
    if check == "result":
        return RESULT_PROMPT.format(
            format=VERDICT.describe(), context=context, question=question, answer=answer
        )
    return ARGUMENT_PROMPT.format(format=VERDICT.describe(), context=context, question=question)


LOGIC_FORM_STAGE = structured_stage(
    "logic_form",
    about="ROGRAG's logic form: a question as a plan of retrieval and operator steps",
    prompt=logic_form_prompt,
    schema=lambda max_steps: logic_form_schema(max_steps),
    max_tokens=logic_form_max_tokens,
    max_steps=ROGRAGConfig.max_steps,
)
VERIFY_STAGE = structured_stage(
    "verify",
    about="ROGRAG's verifier: whether a context supports answering (argument) or an answer (result)",
    prompt=verdict_prompt,
    schema=VERDICT,
    max_tokens=16,
)


def _add(tokens: list[dict[str, int]], stage: str, counts: list[int]) -> None:
    for t, n in zip(tokens, counts, strict=True):
        t[stage] = t.get(stage, 0) + n
