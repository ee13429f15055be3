"""ROGRAG's logic forms: the schema's rules, level-by-level execution batched across questions (the part that needs models, servers or real data)."""

from __future__ import annotations

import json
import re

import pytest

from graphrag_engine.methods.rograg.logic_forms import (
    LogicForm,
    LogicStep,
    execute,
)


@pytest.fixture(scope="module")
def comparisons(shared_data) -> list[dict]:
    qs = [json.loads(x) for x in (shared_data / "2wikimultihopqa_dev.jsonl").open()]
    return [
        q
        for q in qs
        if q["type"] == "bridge_comparison"
        and re.search(r"\b(younger|older)\b", q["question"])
        and [r for _, r, _ in q["meta"]["evidences"]].count("director") == 2
    ]


def _oracle(questions: list[dict], calls: list[int]):
    """Answers "What is the date of birth of X?" from the questions' gold evidence."""
    facts = {
        s.lower(): v
        for q in questions
        for s, r, v in q["meta"]["evidences"]
        if r == "date of birth"
    }

    def answer(texts: list[str]) -> list[str]:
        calls.append(len(texts))
        return [
            facts.get(
                t.removeprefix("What is the date of birth of ").rstrip("?").lower(), "unknown"
            )
            for t in texts
        ]

    return answer


def _younger_form(q: dict) -> LogicForm:
    films = [s for s, r, _ in q["meta"]["evidences"] if r == "director"][:2]
    people = {s: o for s, r, o in q["meta"]["evidences"] if r == "director"}
    steps = [
        LogicStep("retrieve", f"What is the date of birth of {people[f]}?", label=f) for f in films
    ]
    relation = "later" if "younger" in q["question"] else "earlier"  # born later = younger
    steps.append(LogicStep("compare", "Whose director is younger or older?", (0, 1), relation))
    return LogicForm(tuple(steps))


def test_gold_values_answer_2wiki_comparisons_batched_as_one_at_a_time(comparisons) -> None:
    forms = [_younger_form(q) for q in comparisons]
    calls: list[int] = []
    batch = execute(forms, _oracle(comparisons, calls))
    assert calls == [2 * len(forms)]  # one lookup call for the whole first level
    right = sum(
        h.results[2].text.lower() == q["answer"].lower()
        for h, q in zip(batch, comparisons, strict=True)
    )
    assert len(forms) >= 10 and right / len(forms) >= 0.9
    for form, hist in zip(forms, batch, strict=True):
        alone = execute([form], _oracle(comparisons, []))[0]
        assert alone.lines() == hist.lines()
