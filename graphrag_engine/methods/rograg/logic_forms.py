"""ROGRAG's logic forms (Algorithm 2): a question as an ordered list of (sub-query, operator)
steps over a fixed operator set, executed level by level across the whole batch.

Operators:
- retrieve: look the sub-query up (the method answers it from retrieved context; "#k" in it
  stands for step k's result);
- filter: the items of one earlier list step whose value (the sub-query asked per item, with
  "{item}" in it) stands in `relation` to `bound`;
- count, union: of earlier list steps; sum, difference: of earlier values;
- compare: which of two earlier steps' values satisfies `relation` (its answer is that step's
  label, or yes / no for equal).

The schema takes steps by position, each one of its operators' shapes (arity in inputs drawn
from 1..k-1, relation and bound where the operator has them), so a constrained answer cannot
break them; the rule checks them again for answers no grammar held, and that "#k" names an
earlier step and a filter's query holds "{item}". Retrieval steps (and filters' per-item
lookups) of one level of every question go out in one call; the rest runs in plain Python
(graphrag_engine/methods/rograg/operators.py): model output is data, never code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import graphrag_engine.methods.rograg.operators as ops
from graphrag_engine.models.structured import ParseError, Schema, json_object

OPERATORS = ("retrieve", "filter", "count", "union", "sum", "difference", "compare")
ARITY = {  # operator -> (least, most) inputs
    "retrieve": (0, 0),
    "filter": (1, 1),
    "count": (1, 1),
    "union": (2, 5),
    "sum": (2, 5),
    "difference": (2, 2),
    "compare": (2, 2),
}
REFERENCE = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class LogicStep:
    """One step: operator, sub-query, 0-based inputs, the relation of compare / filter, the
    filter's bound, and the label that names what the step's value is about."""

    operator: str
    query: str
    inputs: tuple[int, ...] = ()
    relation: str = "none"
    bound: str = ""
    label: str = ""

    def needs(self) -> set[int]:
        """Earlier steps (0-based) this one reads: its inputs and its "#k" references."""
        return set(self.inputs) | {int(k) - 1 for k in REFERENCE.findall(self.query)}


@dataclass(frozen=True)
class LogicForm:
    """A question's steps; the last one's result answers it."""

    steps: tuple[LogicStep, ...]
    source: str = "llm"

    def levels(self) -> list[list[int]]:
        """Steps grouped by level: one above the deepest step each reads."""
        level: list[int] = []
        for step in self.steps:
            level.append(1 + max((level[d] for d in step.needs()), default=-1))
        out: list[list[int]] = [[] for _ in range(max(level, default=-1) + 1)]
        for i, lv in enumerate(level):
            out[lv].append(i)
        return out


def _check(value: dict) -> LogicForm:
    steps = []
    for k, s in enumerate(value["steps"], 1):
        op, query, inputs = s["operator"], s["query"].strip(), [i - 1 for i in s["inputs"]]
        least, most = ARITY[op]
        if not least <= len(inputs) <= most:
            raise ParseError(f"step {k} ({op}) takes {least}-{most} inputs, not {len(inputs)}")
        if any(not 0 <= i < k - 1 for i in inputs):
            raise ParseError(f"step {k} reads a step that is not an earlier one")
        refs = [int(r) for r in REFERENCE.findall(query)]
        if any(not 1 <= r < k for r in refs):
            raise ParseError(f"step {k} refers to a step that is not an earlier one")
        if op in ("compare", "filter") and s["relation"] not in ops.RELATIONS:
            raise ParseError(f"step {k} ({op}) needs a relation")
        if op == "filter" and ("{item}" not in query or not s["bound"].strip()):
            raise ParseError(f"step {k} (filter) needs {{item}} in its query and a bound")
        steps.append(
            LogicStep(op, query, tuple(inputs), s["relation"], s["bound"].strip(), s["label"])
        )
    return LogicForm(tuple(steps))


@lru_cache(maxsize=8)
def logic_form_schema(max_steps: int) -> Schema[LogicForm]:
    """The logic-form answer: 1..max_steps steps. Step k is one of its operators' shapes: the
    operator's arity in inputs drawn from 1..k-1 (so step 1 can only retrieve), a relation for
    compare and filter ("none" for the rest), a bound only for filter."""
    plain = {"type": "string", "minLength": 3, "maxLength": 160}
    fields = {  # per operator, the fields whose shape depends on it
        op: {
            "query": plain | {"pattern": ".*\\{item\\}.*"} if op == "filter" else plain,  # per item
            "relation": {"enum": list(ops.RELATIONS) if op in ("compare", "filter") else ["none"]},
            "bound": {"type": "string", "minLength": 1, "maxLength": 40}
            if op == "filter"
            else {"enum": [""]},
        }
        for op in OPERATORS
    }

    def step(k: int) -> dict:
        shapes = []
        for op in OPERATORS:
            least, most = ARITY[op][0], min(ARITY[op][1], k - 1)
            if least > most:  # fewer earlier steps than the operator reads
                continue
            inputs: dict = {"type": "array", "maxItems": 0}
            if most:
                choices = {"enum": list(range(1, k))}
                inputs = {"type": "array", "items": choices, "minItems": least, "maxItems": most}
            shape = {"operator": {"enum": [op]}, "query": fields[op]["query"], "inputs": inputs}
            shape |= {"relation": fields[op]["relation"], "bound": fields[op]["bound"]}
            shapes.append(json_object(shape | {"label": {"type": "string", "maxLength": 60}}))
        return {"anyOf": shapes}

    steps = [step(k) for k in range(1, max_steps + 1)]
    shape = {"type": "array", "prefixItems": steps, "items": False, "minItems": 1}
    return Schema(json_object({"steps": shape | {"maxItems": max_steps}}), _check)


@dataclass
class History:
    """A question's executed steps: the text each asked (answers substituted) and its result."""

    asked: dict[int, str] = field(default_factory=dict)
    results: dict[int, ops.Outcome] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The history as context lines, in step order."""
        return [f"{self.asked[i]} -> {self.results[i].text}" for i in sorted(self.results)]


Answerer = Callable[[list[str]], list[str]]
"""Answers a batch of sub-queries from retrieved context (one batched call)."""


def execute(forms: list[LogicForm], answer: Answerer) -> list[History]:
    """Every question's logic form, level by level across the batch: one `answer` call per
    level for its retrieve steps and its filters' per-item lookups; the other operators in
    plain Python over the results of earlier levels."""
    out = [History() for _ in forms]
    levels = [f.levels() for f in forms]
    for depth in range(max(map(len, levels), default=0)):
        jobs = [(q, s) for q, lv in enumerate(levels) if depth < len(lv) for s in lv[depth]]
        texts: list[str] = []
        where: list[tuple[int, int, str | None]] = []  # (question, step, filter item)
        for q, s in jobs:
            out[q].asked[s] = _substitute(forms[q].steps[s].query, out[q])
            for item, text in _step_lookups(forms[q], s, out[q]):
                texts.append(text)
                where.append((q, s, item))
        answers = answer(texts) if texts else []
        found: dict[tuple[int, int], list[tuple[str | None, str]]] = {}
        for (q, s, item), a in zip(where, answers, strict=True):
            found.setdefault((q, s), []).append((item, a))
        for q, s in jobs:
            out[q].results[s] = _run(forms[q], s, out[q], found.get((q, s), []))
    return out


def lookups(form: LogicForm, hist: History) -> list[str]:
    """The texts an executed form looked up (retrieve steps, filters' per-item queries), in
    step order."""
    return [text for s in sorted(hist.asked) for _, text in _step_lookups(form, s, hist)]


def _step_lookups(form: LogicForm, s: int, hist: History) -> list[tuple[str | None, str]]:
    """(filter item or None, lookup text) of step s, once its inputs have results."""
    step = form.steps[s]
    if step.operator == "retrieve":
        return [(None, hist.asked[s])]
    if step.operator == "filter":
        return [(i, step.query.replace("{item}", i)) for i in hist.results[step.inputs[0]].items]
    return []


def _substitute(text: str, hist: History) -> str:
    return REFERENCE.sub(
        lambda m: (
            hist.results[int(m.group(1)) - 1].text
            if int(m.group(1)) - 1 in hist.results
            else m.group(0)
        ),
        text,
    )


def _run(form: LogicForm, s: int, hist: History, found: list) -> ops.Outcome:
    """One step's outcome from its lookups (retrieve, filter) or earlier results."""
    step = form.steps[s]
    prior = [hist.results[i] for i in step.inputs]
    if step.operator == "retrieve":
        text = found[0][1] if found else ""
        return ops.Outcome(text, tuple(ops.split_items(text)))
    if step.operator == "filter":
        items = [item for item, _ in found]
        return ops.keep(items, [a for _, a in found], step.relation, step.bound)
    if step.operator == "count":
        return ops.Outcome(str(len(prior[0].items)), prior[0].items)
    if step.operator == "union":
        items = list(dict.fromkeys(x for p in prior for x in p.items))
        return ops.Outcome(", ".join(items), tuple(items))
    if step.operator == "sum":
        return ops.total([p.text for p in prior])
    if step.operator == "difference":
        return ops.difference(prior[0].text, prior[1].text)
    labels = tuple(form.steps[i].label or form.steps[i].query for i in step.inputs)
    return ops.compare(labels, (prior[0].text, prior[1].text), step.relation)
