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

from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import ParseError, Schema, generate_structured, json_object

REFERENCE = re.compile(r"#(\d+)")
WORD = re.compile(r"[^\W\d_]{2,}")  # two letters in a row: "..." or "#1?" is not a question
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
    """PankRAG's plan answer: 1..max_steps sub-questions, each with its scope and the earlier
    step numbers it needs. Step k's dependencies are an enum of 1..k-1 (none for step 1), so a
    grammar-constrained answer cannot hold a self, forward or out-of-range reference; the rule
    still checks "#k" references in the texts and cycles (for backends without a grammar)."""

    def step(k: int) -> dict:
        needs: dict = {"type": "array", "maxItems": 0}
        if k > 1:
            needs = {"type": "array", "items": {"enum": list(range(1, k))}, "maxItems": k - 1}
        return json_object(
            {
                "question": {"type": "string", "minLength": 3, "maxLength": 160},
                "depends_on": needs,
                "scope": {"enum": ["specific", "abstract"]},
            }
        )

    steps = [step(k) for k in range(1, max_steps + 1)]
    schema = json_object(
        {
            "steps": {
                "type": "array",
                "prefixItems": steps,
                "items": False,
                "minItems": 1,
                "maxItems": max_steps,
            }
        }
    )

    def check(value: dict) -> Plan:
        raw = value["steps"]
        for k, s in enumerate(raw, 1):
            if not WORD.search(s["question"]):
                raise ParseError(f"step {k} has no words ({s['question']!r})")
        steps = ordered(
            [s["question"].strip() for s in raw],
            [list(s["depends_on"]) for s in raw],
            [s["scope"] for s in raw],
        )
        return Plan(steps, "llm")

    return Schema(schema, check)


PLAN_PROMPT = """Plan how to answer the question below as a short list of sub-questions (at most
{max_steps}), read as a whole before writing any of them.
- Split it into the facts it needs. Facts that do not depend on each other are separate
  sub-questions with no dependencies; a sub-question that needs an earlier answer writes "#k"
  where step k's answer goes and lists k in "depends_on".
- Rewrite vague or ambiguous wording into explicit sub-questions.
- Mark a sub-question "specific" when it asks for a concrete fact about named things, and
  "abstract" when it asks about a broad theme, trend or overview.
- The last sub-question answers the original question. A simple question is one step.
Reply with one JSON object of this form and nothing else:
{format}

Question: {question}
JSON:"""


def plan_prompt(question: str, max_steps: int) -> str:
    """The planning prompt of one question."""
    fmt = plan_schema(max_steps).describe()
    return PLAN_PROMPT.format(max_steps=max_steps, format=fmt, question=question)


PLAN_STAGE = structured_stage(
    "pankrag_plan",
    about="PankRAG's plan: a question's sub-questions as a DAG, each specific or abstract",
    prompt=plan_prompt,
    schema=lambda max_steps: plan_schema(max_steps),
    max_tokens=lambda max_steps: 24 + 64 * max_steps,  # ~50 tokens a step, with room for the JSON
    max_steps=5,
)


@dataclass
class Planned:
    """Per question: its plan (the question as one step where the answer never validated),
    the planner's tokens and asks (re-asks included), and why the last ask failed (None when it
    validated)."""

    plans: list[Plan]
    tokens: list[int]
    attempts: list[int]
    errors: list[str | None]

    @property
    def fallback(self) -> list[bool]:
        """Per question: whether its plan fell back to the question alone."""
        return [e is not None for e in self.errors]


def make_plans(
    llm: Any, questions: list[str], max_steps: int, retries: int, scope: Scope = "specific"
) -> Planned:
    """Every question's plan from one batched, schema-constrained LLM call; an answer that
    never validates (cycle, dangling reference, wrong shape) leaves the question as its only
    step, with `scope`, and is counted."""
    prompts = [PLAN_STAGE.prompt(q, max_steps) for q in questions]
    run = generate_structured(
        llm,
        prompts,
        PLAN_STAGE.schema(max_steps=max_steps),
        GenParams(max_tokens=PLAN_STAGE.max_tokens(max_steps=max_steps)),
        stage="pankrag_plan",
        retries=retries,
    )
    planned = Planned([], [], [], [])
    for q, res in zip(questions, run.results, strict=True):
        ok = res.ok and res.value is not None
        planned.plans.append(res.value if ok else Plan((Step(q, (), scope),), "fallback"))
        planned.tokens.append(res.tokens)
        planned.attempts.append(res.attempts)
        planned.errors.append(None if ok else res.error or "no answer")
    return planned


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


REWRITE = Schema(
    json_object({"question": {"type": "string", "minLength": 3, "maxLength": 200}}),
    lambda v: _worded(v["question"]),
)
"""The top-down rewrite's answer: one self-contained sub-question."""


def _worded(text: str) -> str:
    if not WORD.search(text):
        raise ParseError(f"the rewritten question has no words ({text!r})")
    return text.strip()


REWRITE_PROMPT = """A question is being answered in steps. The step below relies on answers
found by earlier steps ("#k" marks where step k's answer belongs). Rewrite the step as one
question that stands on its own: put the earlier answers in by name, make vague or ambiguous
wording explicit with their help, and keep what it asks unchanged. Reply with one JSON object
of this form and nothing else: {format}

Whole question: {question}
Earlier steps and their answers:
{resolved}
Step to rewrite: {step}
JSON:"""


def rewrite_prompt(question: str, resolved: list[tuple[int, str, str]], step: str) -> str:
    """The rewrite prompt of one dependent step: (step number, text, answer) of its parents."""
    lines = "\n".join(f"- #{k}: {text} -> {answer}" for k, text, answer in resolved)
    return REWRITE_PROMPT.format(
        format=REWRITE.describe(), question=question, resolved=lines, step=step
    )


REWRITE_STAGE = structured_stage(
    "pankrag_rewrite",
    about="PankRAG's top-down disambiguation: a dependent sub-question rewritten with its "
    "parents' answers",
    prompt=rewrite_prompt,
    schema=REWRITE,
    max_tokens=64,
)


@dataclass
class Rewritten:
    """Per dependent step: its rewritten text (the substituted one where the answer never
    validated), the tokens spent, and whether it fell back."""

    texts: list[str]
    tokens: list[int]
    fallback: list[bool]


def rewrite_steps(
    llm: Any,
    questions: list[str],
    resolved: list[list[tuple[int, str, str]]],
    steps: list[str],
    retries: int,
) -> Rewritten:
    """Top-down disambiguation of one DAG level: every dependent step rewritten with its
    parents' answers in one batched, schema-constrained call; an answer that never validates
    keeps the step with the answers substituted for "#k", and is counted."""
    prompts = [
        REWRITE_STAGE.prompt(q, r, s) for q, r, s in zip(questions, resolved, steps, strict=True)
    ]
    run = generate_structured(
        llm, prompts, REWRITE, GenParams(max_tokens=REWRITE_STAGE.max_tokens()),
        stage="pankrag_rewrite", retries=retries,
    )  # fmt: skip
    out = Rewritten([], [], [])
    for step, parents, res in zip(steps, resolved, run.results, strict=True):
        ok = res.ok and res.value is not None
        answers = {k - 1: a for k, _, a in parents}
        out.texts.append(res.value if ok else substitute(step, answers))
        out.tokens.append(res.tokens)
        out.fallback.append(not ok)
    return out
