"""The answer stage: contexts + questions -> short answers, one batched LLM call for the batch.

fit (section-aware: items cut from the end, a `whole` section kept or dropped entire, at least
the first item always kept) -> prompt (the method's answer prompt, or the shared one) ->
generate. A context with a preset answer sends no prompt. Methods call `answer_batch` for
intermediate answers too (sub-questions), under their own stage name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphrag_engine.models.base import Completion, GenParams
from graphrag_engine.retrieve.types import Context, Section

TokenCounter = Callable[[list[str]], list[int]]
"""Tokens of each text by the tokenizer a context is budgeted in."""

PromptFn = Callable[[str, "list[str] | None", Any], Any]
"""(question, context texts or None, the method's options) -> a chat prompt."""

SYSTEM = (
    "You answer questions. Use the passages when they are given. Reply with the answer only, "
    "in as few words as possible."
)
WITH_CONTEXT = "Passages:\n{context}\n\nQuestion: {question}\nAnswer:"
WITHOUT_CONTEXT = "Question: {question}\nAnswer:"
LONG_SYSTEM = (
    "You answer questions from the data given. Write a complete, well-organised answer of a "
    "few paragraphs that draws on the data, say what the data does not cover, and add no fact "
    "the data does not state. Answer in the language of the question."
)
LONG_KINDS = frozenset({"abstract", "evidence"})
"""Question kinds without short gold answers (UltraDomain, MultiHop-RAG): long answers."""


def answer_style(style: str, kinds: list[str]) -> str:
    """The run's answer style: the configured one, or for `auto` long when every question is
    of a long-answer kind, else short."""
    if style != "auto":
        return style
    return "long" if kinds and all(k in LONG_KINDS for k in kinds) else "short"


def prompt_for(spec: Any, style: str) -> PromptFn | None:
    """The answer prompt of a method under a style (None: the shared short prompt): short
    shares one instruction across methods; long takes the method's paper prompt when it is a
    long-form one, else the shared long prompt; method keeps whatever it registered."""
    if style == "method":
        return spec.answer_prompt
    if style == "long":
        own = spec.answer_prompt if spec.prompt_style == "long" else None
        return own or long_prompt
    return None


def keeps_whole(spec: Any, style: str) -> bool:
    """Whether the answers of a method under a style are long ones, kept whole (all lines)."""
    return style == "long" or (style == "method" and spec.prompt_style == "long")


def long_prompt(question: str, texts: list[str] | None, options: Any = None) -> list[dict]:
    """The shared long-form answer prompt (methods whose paper gives none)."""
    data = "\n\n".join(f"[{i + 1}] {p}" for i, p in enumerate(texts or [])) or "(none)"
    user = f"Data:\n{data}\n\nQuestion: {question}\nAnswer:"
    return [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": user}]


def fit_sections(
    sections: list[Section], counts: list[list[int]], max_tokens: int
) -> list[Section]:
    """The leading part of `sections` whose items fit `max_tokens` (`counts[s][i]`: tokens of
    item i of section s, a title counted with its first item); the first item always stays."""
    out: list[Section] = []
    used = 0
    for sec, cnt in zip(sections, counts, strict=True):
        if sec.whole:
            need = sum(cnt)
            if out and used + need > max_tokens:
                break
            out.append(sec)
            used += need
            continue
        kept: list[str] = []
        for text, n in zip(sec.items, cnt, strict=True):
            if (out or kept) and used + n > max_tokens:
                break
            kept.append(text)
            used += n
        if kept:
            left = None if sec.counts is None else sec.counts[: len(kept)]
            out.append(Section(kept, sec.title, sec.whole, left))
        if len(kept) < len(sec.items):
            break
    return out


def fit_context(context: Context, count_tokens: TokenCounter, max_tokens: int) -> Context:
    """`context` cut to `max_tokens` tokens (see `fit_sections`): each item's tokens from its
    section's `counts` where the budget that kept it knew them, else by `count_tokens` (a
    run's `QueryContext.count_tokens`, which counts a text once per opened index and keeps
    it), with every uncounted item and title counted in one call."""
    sections = context.sections
    known = [s.counts if s.counts is not None and len(s.counts) == len(s.items) else None
             for s in sections]  # fmt: skip
    asked = [t for s, c in zip(sections, known, strict=True) if c is None for t in s.items]
    asked += [s.title for s in sections if s.title and s.items]
    found = iter(count_tokens(asked) if asked else [])
    counts = []
    for s, c in zip(sections, known, strict=True):
        c = list(c) if c is not None else [next(found) for _ in s.items]
        counts.append(c)
    for s, c in zip(sections, counts, strict=True):
        if s.title and c:
            c[0] += next(found)
    return Context(fit_sections(sections, counts, max_tokens), context.preset_answer)


def answer_prompts(questions: list[str], contexts: list[list[str] | None]) -> list[list[dict]]:
    """Chat prompts of the shared answer stage; a None context means no retrieval."""
    prompts = []
    for q, ctx in zip(questions, contexts, strict=True):
        if ctx is None:
            user = WITHOUT_CONTEXT.format(question=q)
        else:
            numbered = "\n\n".join(f"[{i + 1}] {p}" for i, p in enumerate(ctx))
            user = WITH_CONTEXT.format(context=numbered, question=q)
        prompts.append([{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}])
    return prompts


def clean_answer(text: str, whole: bool = False) -> str:
    """First line of the model's answer (`whole`: all of it), without an echoed "Answer:"
    label."""
    line = text.strip() if whole else text.strip().split("\n", 1)[0].strip()
    if line.lower().startswith("answer:"):
        line = line[7:].strip()
    return line


@dataclass
class Answered:
    """The answers of a batch, the contexts as the prompts held them, and tokens per question."""

    answers: list[str | None]
    contexts: list[Context | None]
    tokens: list[dict[str, int]]
    failed: list[str | None] = None  # type: ignore[assignment]
    """Per question, why its prompt failed after every retry (None: answered)."""


@dataclass
class AnswerAsk:
    """What the answer stage of a batch sends: each fitted context, which questions are asked
    (those without a preset answer), their prompts and the generation parameters."""

    fitted: list[Context | None]
    ask: list[int]
    prompts: list[Any]
    params: GenParams


def answer_ask(
    count_tokens: TokenCounter,
    questions: list[str],
    contexts: list[Context | None],
    max_context_tokens: int,
    max_tokens: int,
    prompt: PromptFn | None = None,
    options: Any = None,
) -> AnswerAsk:
    """Fit every context and build the prompt of every question without a preset answer (the
    first half of `answer_batch`, shared with runs that answer together)."""
    fitted = [
        None if c is None else fit_context(c, count_tokens, max_context_tokens) for c in contexts
    ]
    ask = [q for q, c in enumerate(fitted) if c is None or c.preset_answer is None]
    texts = [None if fitted[q] is None else fitted[q].texts() for q in ask]
    asked = [questions[q] for q in ask]
    if prompt is not None:
        prompts = [prompt(q, t, options) for q, t in zip(asked, texts, strict=True)]
    else:
        prompts = answer_prompts(asked, texts)
    return AnswerAsk(fitted, ask, prompts, GenParams(max_tokens=max_tokens))


def answer_batch(
    llm,
    count_tokens: TokenCounter,
    questions: list[str],
    contexts: list[Context | None],
    max_context_tokens: int,
    max_tokens: int,
    prompt: PromptFn | None = None,
    options: Any = None,
    stage: str = "answer",
    keep_failures: bool = False,
    on_progress: Callable[[float], None] | None = None,
    whole: bool = False,
) -> Answered:
    """Fit every context, prompt every question without a preset answer in one batched call
    (cached, resumable), and clean the answers; a None context means no retrieval (the
    sub-answer stages' entry: `answer_ask`, then `send_ask`)."""
    sent = answer_ask(
        count_tokens, questions, contexts, max_context_tokens, max_tokens, prompt, options
    )
    return send_ask(llm, sent, stage, keep_failures, on_progress, whole)


def send_ask(
    llm,
    sent: AnswerAsk,
    stage: str = "answer",
    keep_failures: bool = False,
    on_progress: Callable[[float], None] | None = None,
    whole: bool = False,
) -> Answered:
    """Send what `answer_ask` built in one batched call (cached, resumable) and clean the
    answers. With `keep_failures` a prompt that fails after its retries leaves its answer None
    and says why in `failed` instead of raising. `on_progress` hears how many questions are
    answered so far (preset answers count from the start); `whole` keeps every line of an
    answer (long answers), else its first."""
    fitted, ask, prompts = sent.fitted, sent.ask, sent.prompts
    preset = len(fitted) - len(prompts)
    heard = None if on_progress is None else (lambda n: on_progress(preset + n))
    done = (
        llm.generate(prompts, sent.params, stage, keep_failures=keep_failures, on_progress=heard)
        if prompts
        else []
    )
    answers: list[str | None] = [c.preset_answer if c is not None else "" for c in fitted]
    failed: list[str | None] = [None] * len(fitted)
    tokens: list[dict[str, int]] = [{} for _ in fitted]
    for q, c, t in zip(ask, done, llm_tokens(done, stage), strict=True):
        answers[q] = clean_answer(c.text, whole) if c.error is None else None
        failed[q] = c.error
        tokens[q] = t
    return Answered(answers, fitted, tokens, failed)


def llm_tokens(completions: list[Completion], stage: str) -> list[dict[str, int]]:
    """Per-question token counts of one LLM stage (prompt + completion)."""
    return [
        {
            f"{stage}_prompt": c.prompt_tokens,
            f"{stage}_completion": c.completion_tokens,
        }
        for c in completions
    ]
