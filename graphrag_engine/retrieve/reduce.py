"""A method's own reduce stage: the answers written from the context the method built (GraphRAG
global search's key points, DRIFT's intermediate answers), in one batched call, so the answer
stage sends nothing for them."""

from __future__ import annotations

from graphrag_engine.retrieve.answer import PromptFn, answer_batch
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import Context


def reduce_answers(
    ctx: QueryContext,
    questions: list[str],
    contexts: list[Context],
    prompt: PromptFn,
    stage: str,
) -> list[dict[str, int]]:
    """Every question without a preset answer answered from its context in one batched call
    (`prompt` for long answers, the shared short one otherwise); a reduced answer becomes the
    context's preset answer, a failed one is asked again by the answer stage. Retrieval-only
    runs stop at the contexts. Returns each question's tokens."""
    gen = ctx.cfg.generation
    ask = [q for q, c in enumerate(contexts) if c.preset_answer is None]
    spent: list[dict[str, int]] = [{} for _ in questions]
    if not gen.enabled or not ask:
        return spent
    long = gen.answer_style == "long"
    done = answer_batch(
        ctx.llm, ctx.count_tokens, [questions[q] for q in ask], [contexts[q] for q in ask],
        ctx.context_tokens, gen.max_tokens, prompt if long else None,
        stage=stage, keep_failures=True, whole=long,
    )  # fmt: skip
    for q, answer, t in zip(ask, done.answers, done.tokens, strict=True):
        spent[q] = t
        if answer is not None:
            contexts[q] = Context(contexts[q].sections, preset_answer=answer)
    return spent
