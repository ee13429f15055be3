"""ROGRAG's verifier (Algorithm 4): one batched verdict per stage of the chain on whether a
question's context supports an answer (argument checking) or the answer given (result
checking)."""

from __future__ import annotations

from dataclasses import dataclass

from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import Schema, generate_structured, json_object
from graphrag_engine.retrieve.answer import answer_batch, fit_context
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import Context

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


@dataclass
class Verdicts:
    """The verifier's decisions for a batch: per question the chain's stage it accepted (None:
    refuse), the answer result checking accepted, and the LLM tokens it spent by stage."""

    chosen: list[str | None]
    answers: list[str | None]
    tokens: list[dict[str, int]]


def verify(
    ctx: QueryContext,
    chain: list[str],
    check: str,
    texts: list[str],
    stage_contexts: dict[str, list[Context]],
) -> Verdicts:
    """The first stage of `chain` whose context the verifier accepts, per question; one
    batched verdict call per stage over the questions still pending."""
    n = len(texts)
    out = Verdicts([None] * n, [None] * n, [{} for _ in texts])
    pending = list(range(n))
    for stage in chain:
        contexts = stage_contexts[stage]
        ask = [q for q in pending if contexts[q].sections]
        if check == "none":
            for q in ask:
                out.chosen[q] = stage
        elif ask:
            checked = _check(ctx, check, [texts[q] for q in ask], [contexts[q] for q in ask])
            for q, (supported, answer, spent) in zip(ask, checked, strict=True):
                for key, count in spent.items():
                    out.tokens[q][key] = out.tokens[q].get(key, 0) + count
                if supported:
                    out.chosen[q], out.answers[q] = stage, answer
        pending = [q for q in pending if out.chosen[q] is None]
    return out


def _check(
    ctx: QueryContext, check: str, questions: list[str], contexts: list[Context]
) -> list[tuple[bool, str | None, dict[str, int]]]:
    """Per question: whether the verdict says the context supports an answer, the answer
    result checking gave first (None for argument checking), and the LLM tokens spent."""
    gen = ctx.cfg.generation
    given: list[str | None] = [None] * len(questions)
    spent: list[dict[str, int]] = [{} for _ in questions]
    if check == "result":
        done = answer_batch(
            ctx.llm, ctx.count_tokens, questions, contexts, ctx.context_tokens, gen.max_tokens
        )
        given = list(done.answers)
        spent = [{"result_answer": sum(t.values())} for t in done.tokens]
    prompts = [
        context_verdict_prompt(ctx, check, q, c, a)
        for q, c, a in zip(questions, contexts, given, strict=True)
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


def context_verdict_prompt(
    ctx: QueryContext, check: str, question: str, context: Context, answer: str | None
) -> str:
    """The verdict prompt over the context the answer prompt would carry: cut, like it, to
    `generation.max_context_tokens` (a verdict on more than the answer sees would be moot, and
    could overflow the model's window)."""
    fitted = fit_context(context, ctx.count_tokens, ctx.context_tokens)
    return VERIFY_STAGE.prompt(check, question, "\n".join(fitted.texts()), answer)


def verdict_prompt(check: str, question: str, context: str, answer: str | None = None) -> str:
    """The verifier's prompt: argument checking asks whether the context can answer the
    question; result checking whether it supports the given answer."""
    if check == "result":
        return RESULT_PROMPT.format(
            format=VERDICT.describe(), context=context, question=question, answer=answer
        )
    return ARGUMENT_PROMPT.format(format=VERDICT.describe(), context=context, question=question)


VERIFY_STAGE = structured_stage(
    "verify",
    about="ROGRAG's verifier: whether a context supports answering (argument) or an answer (result)",
    prompt=verdict_prompt,
    schema=VERDICT,
    max_tokens=16,
)
