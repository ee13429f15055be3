"""What a method is: a batch retrieval step over all questions, then the shared answer stage.

A method file composes retrieve/ operators and reads like its paper's algorithm box. It gets
the whole batch of questions and returns a `Retrieved` for all of them; the runner handles
checkpoints, answer generation, timing and output files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from engine.eval.datasets import Question
from engine.retrieve.context import QueryContext
from engine.retrieve.ranking import ChunkRanking


@dataclass
class Retrieved:
    """A batch's retrieval result: ranked chunks (None for no retrieval), per-question extras
    (e.g. linked entities, a HyDE passage), per-question LLM tokens and per-stage seconds."""

    ranking: ChunkRanking | None
    extras: list[dict[str, Any]]
    tokens: list[dict[str, int]]
    seconds: dict[str, float] = field(default_factory=dict)
    contexts: list[list[str]] | None = None
    """Context texts the method built itself (e.g. reasoning paths), used instead of chunks."""


class StageClock:
    """Wall seconds per named stage of a batch."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block under `name` (repeated names add up)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0


MethodFn = Callable[[QueryContext, list[Question], StageClock], Retrieved]
PromptFn = Callable[[str, "list[str] | None", Any], Any]
METHODS: dict[str, MethodFn] = {}
ANSWER_PROMPTS: dict[str, PromptFn] = {}


def register(name: str, answer_prompt: PromptFn | None = None) -> Callable[[MethodFn], MethodFn]:
    """Class-free registry: `@register("bm25")` on a function (ctx, questions, clock) -> Retrieved;
    `answer_prompt(question, passages, cfg)` replaces the shared answer prompt for that method."""

    def wrap(fn: MethodFn) -> MethodFn:
        METHODS[name] = fn
        if answer_prompt is not None:
            ANSWER_PROMPTS[name] = answer_prompt
        return fn

    return wrap


def get_method(name: str) -> MethodFn:
    """The retrieval function of a registered method."""
    import engine.methods  # noqa: F401  (registers the built-in methods)

    return METHODS[name]


def llm_tokens(completions: list, stage: str) -> list[dict[str, int]]:
    """Per-question token counts of one LLM stage (prompt + completion)."""
    return [
        {
            f"{stage}_prompt": c.prompt_tokens,
            f"{stage}_completion": c.completion_tokens,
        }
        for c in completions
    ]
