"""Context budgets as the papers publish them, fitted to the answering model's window.

Every method's default section budgets are its paper's (or its reference implementation's):
LightRAG 4,000 tokens each of entities, relations and sources; GraphRAG local search 12,000;
ROGRAG 8,000 / 8,000 / 12,000; GraphRAG global search 8,000 per map batch and 8,000 of key
points. A method's config totals them (`context_budget()`). The window a run answers in is
`generation.max_context_tokens` when set, else the answering model's context window (asked of
the backend where it can tell) less the answer's tokens and room for the prompt's own words,
else unbounded (a server that does not say, or retrieval only). When the total exceeds the
window every section shrinks by the same factor, and the run says so once: on stderr and in
`summary.json` (`context_budget`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PROMPT_ROOM = 256
"""Tokens left in the window for the answer prompt's own words (instruction, question)."""
UNBOUNDED = 10**9
"""The window when nothing bounds it."""


@dataclass
class ContextBudget:
    """The method's published total, the window it answers in, and the factor between."""

    declared: int | None
    window: int | None
    basis: str

    @property
    def scale(self) -> float:
        """Factor every section budget is multiplied by (1: the published budgets fit)."""
        if not self.declared or not self.window or self.window >= self.declared:
            return 1.0
        return self.window / self.declared

    @property
    def tokens(self) -> int:
        """The window as a token count for fitting contexts (UNBOUNDED when none)."""
        return self.window or UNBOUNDED

    def note(self, method: str) -> str | None:
        """The line a run prints once when its budgets shrink (None when they fit)."""
        if self.scale >= 1.0:
            return None
        return (
            f"{method}: context budgets of {self.declared:,} tokens (the paper's) shrink "
            f"x{self.scale:.2f} to fit an answer window of {self.window:,} tokens ({self.basis})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The summary.json entry."""
        return {**asdict(self), "scale": round(self.scale, 4)}


def resolve_budget(
    declared: int | None,
    max_context_tokens: int | None,
    model_window: int | None,
    answer_tokens: int,
    answering: bool,
) -> ContextBudget:
    """The run's budget: an explicit window, else the model's less the answer, else none."""
    if max_context_tokens is not None:
        return ContextBudget(declared, max_context_tokens, "generation.max_context_tokens")
    if model_window and answering:
        window = max(model_window - answer_tokens - PROMPT_ROOM, 1)
        return ContextBudget(
            declared, window,
            f"the model's window of {model_window:,} less {answer_tokens} answer and "
            f"{PROMPT_ROOM} prompt tokens",
        )  # fmt: skip
    why = "no answers are generated" if not answering else "the model's window is not known"
    return ContextBudget(declared, None, f"unbounded: {why}")


def config_budget(cfg: Any, model_window: int | None) -> ContextBudget:
    """The budget a query config (a QueryConfig) runs at when its answering model attends over
    `model_window` tokens (None: not known): its method's declared total against
    `generation.max_context_tokens`, else `models.llm.context_window`, else the model's."""
    gen = cfg.generation
    declared = getattr(cfg.options, "context_budget", None)
    window = cfg.models.llm.context_window or model_window
    return resolve_budget(
        declared() if declared is not None else None,
        gen.max_context_tokens,
        window,
        gen.max_tokens,
        gen.enabled,
    )
