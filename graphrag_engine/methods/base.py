"""What a method is, and the registry that holds every method with everything it owns.

A method is a batch retrieval step over all questions, `(ctx, questions, clock) -> Retrieved`,
registered with `@register(name, config=..., answer_prompt=..., paper=..., needs=...)`: its
config dataclass (the YAML section under the method's name, validated by itself), its answer
prompt (else the shared one), the index parts it needs (typed, checked before a run starts:
needs.py) and a line for `graphrag-engine methods`. The runner (run.py)
batches, checkpoints and writes files; the answer stage (answer.py) fits, prompts and
generates. Adding a method touches its own file, its config YAML and nothing central.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods.needs import Part, parts
from graphrag_engine.retrieve.answer import PromptFn
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import Retrieved, StageClock

MethodFn = Callable[[QueryContext, list[Question], StageClock], Retrieved]


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its retrieval, its config section and answer prompt, what it is."""

    name: str
    retrieve: MethodFn
    config: type | None = None
    answer_prompt: PromptFn | None = None
    paper: str = ""
    needs: frozenset[Part] = frozenset()
    """The index parts (and question fields) it cannot run without."""
    uses: frozenset[Part] = frozenset()
    """Parts it reads when the index has them and does without otherwise."""
    needs_note: str = ""
    """What the settings change about the parts (the config's `needs()` computes it)."""
    prompt_style: str = "short"
    """The kind of answer `answer_prompt` asks for: short (a few words) or long (a report)."""


METHODS: dict[str, MethodSpec] = {}


def register(
    name: str,
    *,
    config: type | None = None,
    answer_prompt: PromptFn | None = None,
    paper: str = "",
    needs: Iterable[Part] = (),
    uses: Iterable[Part] = (),
    needs_note: str = "",
    prompt_style: str = "short",
) -> Callable[[MethodFn], MethodFn]:
    """`@register("bm25", paper=..., needs={Part.CHUNKS})` on a function (ctx, questions,
    clock) -> Retrieved; `config` is the method's own settings dataclass (YAML section
    `name:`), `answer_prompt(question, texts, options)` is the paper's answer prompt, of
    `prompt_style` short or long (graphrag_engine.retrieve.answer.prompt_for picks it)."""

    def wrap(fn: MethodFn) -> MethodFn:
        METHODS[name] = MethodSpec(
            name, fn, config, answer_prompt, paper, parts(needs), parts(uses), needs_note,
            prompt_style,
        )  # fmt: skip
        return fn

    return wrap
