"""The registry of structured LLM stages: each stage (its ledger name, prompt builder, schema
and completion budget) is declared once, beside its prompt, with `structured_stage(...)`.

The bench of structured generation, the forecasts and the docs read stages from here instead
of importing prompts and schemas from the modules that own them; `graphrag_engine.stages`
imports every declaring module, so `structured_stages()` there lists them all."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphrag_engine.models.base import Prompt
from graphrag_engine.models.structured import Schema


@dataclass(frozen=True)
class StructuredStage:
    """One structured LLM stage: the name its tokens are accounted under, what it is for, the
    prompt it builds from its inputs (text, which every backend sends as one user message, or
    a chat when the stage continues a conversation), and its schema and completion budget for
    its settings (`settings` holds their defaults: those of the config that owns the stage)."""

    name: str
    about: str
    prompt: Callable[..., Prompt]
    schema_of: Callable[..., Schema]
    max_tokens_of: Callable[..., int]
    settings: Mapping[str, Any] = field(default_factory=dict)
    owner: str = ""

    def _settings(self, given: dict[str, Any]) -> dict[str, Any]:
        unknown = set(given) - set(self.settings)
        if unknown:
            raise TypeError(f"stage {self.name!r} has no setting {sorted(unknown)[0]!r}")
        return {**self.settings, **given}

    def schema(self, **settings: Any) -> Schema:
        """The answer schema for these settings (the defaults where not given)."""
        return self.schema_of(**self._settings(settings))

    def max_tokens(self, **settings: Any) -> int:
        """The completion budget for these settings (the defaults where not given)."""
        return self.max_tokens_of(**self._settings(settings))


STAGES: dict[str, StructuredStage] = {}


def _constant(value: Any) -> Callable[..., Any]:
    return lambda **_: value


def structured_stage(
    name: str,
    *,
    about: str,
    prompt: Callable[..., Prompt],
    schema: Schema | Callable[..., Schema],
    max_tokens: int | Callable[..., int],
    **settings: Any,
) -> StructuredStage:
    """Declare a stage beside its prompt and register it; `schema` and `max_tokens` are
    constants or functions of the stage's settings (keyword arguments, defaults given here)."""
    if name in STAGES:
        raise ValueError(f"structured stage {name!r} is declared twice")
    stage = StructuredStage(
        name,
        about,
        prompt,
        _constant(schema) if isinstance(schema, Schema) else schema,
        _constant(max_tokens) if isinstance(max_tokens, int) else max_tokens,
        dict(settings),
        sys._getframe(1).f_globals.get("__name__", ""),
    )
    STAGES[name] = stage
    return stage
