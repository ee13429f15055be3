"""Question plans as DAGs of sub-questions (PankRAG's globally-aware planning), their
validation, topological levels and answer substitution, and the gold plans of MuSiQue.

A step's text may name an earlier step's answer as "#k" (1-based, MuSiQue's notation); its
dependencies are the steps it names and the ones it lists. A plan is valid when every
reference names another step of the plan and the dependencies form no cycle. Steps at the same
level depend only on lower levels, so a batch runs a level of every question's plan at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from engine.models.structured import ParseError, Schema, json_object

REFERENCE = re.compile(r"#(\d+)")
Scope = Literal["specific", "abstract"]


@dataclass(frozen=True)
class Step:
    """One sub-question: its text, the steps (0-based) whose answers it needs, its scope."""

    text: str
    depends_on: tuple[int, ...] = ()
    scope: Scope = "specific"


@dataclass(frozen=True)
class Plan:
    """A question's sub-questions; the last step answers the question."""

    steps: tuple[Step, ...]
    source: Literal["llm", "gold", "fallback", "direct"] = "llm"

    def levels(self) -> list[list[int]]:
        """Steps grouped by topological level (a step sits one above its deepest dependency)."""
        level: list[int] = []
        for i, step in enumerate(self.steps):  # validated plans are in dependency order
            level.append(1 + max((level[d] for d in step.depends_on), default=-1))
            assert all(d < i for d in step.depends_on), "plan steps out of dependency order"
        out: list[list[int]] = [[] for _ in range(max(level, default=-1) + 1)]
        for i, lv in enumerate(level):
            out[lv].append(i)
        return out

    def edges(self) -> list[tuple[int, int]]:
        """(dependency, step) pairs, 0-based."""
        return [(d, i) for i, s in enumerate(self.steps) for d in s.depends_on]


def substitute(text: str, answers: dict[int, str]) -> str:
    """`text` with every "#k" replaced by step k's answer (0-based keys in `answers`)."""
    return REFERENCE.sub(lambda m: answers.get(int(m.group(1)) - 1, m.group(0)), text)


def ordered(texts: list[str], listed: list[list[int]], scopes: list[Scope]) -> tuple[Step, ...]:
    """Steps from texts, 1-based listed dependencies and scopes, put in dependency order
    (stable); ParseError on a reference to no step, to itself, or on a cycle."""
    n = len(texts)
    deps: list[set[int]] = []
    for i, (text, given) in enumerate(zip(texts, listed, strict=True)):
        refs = {int(k) for k in REFERENCE.findall(text)} | set(given)
        bad = sorted(r for r in refs if not 1 <= r <= n or r == i + 1)
        if bad:
            raise ParseError(f"step {i + 1} refers to step {bad[0]}, which is not another step")
        deps.append({r - 1 for r in refs})
    order: list[int] = []
    done: set[int] = set()
    while len(order) < n:
        ready = [i for i in range(n) if i not in done and deps[i] <= done]
        if not ready:
            raise ParseError("the sub-questions' dependencies form a cycle")
        order.append(ready[0])
        done.add(ready[0])
    new = {old: k for k, old in enumerate(order)}

    def renumber(text: str) -> str:
        return REFERENCE.sub(lambda m: f"#{new[int(m.group(1)) - 1] + 1}", text)

    return tuple(
        Step(renumber(texts[i]), tuple(sorted(new[d] for d in deps[i])), scopes[i]) for i in order
    )


@lru_cache(maxsize=8)
def plan_schema(max_steps: int) -> Schema[Plan]:
    """PankRAG's plan answer: 1..max_steps sub-questions, each with the step numbers it needs
    and its scope; the rule: references resolve and form no cycle."""
    step = json_object(
        {
            "question": {"type": "string", "minLength": 3, "maxLength": 160},
            "depends_on": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1, "maximum": max_steps},
                "maxItems": max_steps - 1 if max_steps > 1 else 0,
            },
            "scope": {"enum": ["specific", "abstract"]},
        }
    )
    schema = json_object(
        {"steps": {"type": "array", "items": step, "minItems": 1, "maxItems": max_steps}}
    )

    def check(value: dict) -> Plan:
        raw = value["steps"]
        steps = ordered(
            [s["question"].strip() for s in raw],
            [list(s["depends_on"]) for s in raw],
            [s["scope"] for s in raw],
        )
        return Plan(steps, "llm")

    return Schema(schema, check)


def direct(text: str, scope: Scope = "specific") -> Plan:
    """The question as its only step (no planning, or a plan that never validated)."""
    return Plan((Step(text, (), scope),), "direct")


def gold_plan(question: Any, scope: Scope = "specific") -> Plan:
    """MuSiQue's gold decomposition (a Question's `decomposition`) as a plan ("#k" names step
    k's answer); a question without one is its only step. ValueError on a decomposition whose
    references do not resolve."""
    steps = question.decomposition
    if not steps:
        return direct(question.question, scope)
    texts = [s["question"] for s in steps]
    try:
        return Plan(ordered(texts, [[] for _ in texts], [scope] * len(texts)), "gold")
    except ParseError as exc:
        raise ValueError(f"question {question.qid}: gold decomposition: {exc}") from None
