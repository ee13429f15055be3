"""Sub-question plans (graphrag_engine/methods/pankrag/plans.py): validation re-orders, rejects cycles and (the part that needs models, servers or real data)."""

from __future__ import annotations

from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods.pankrag.plans import (
    Step,
    direct,
    gold_plan,
    substitute,
)


def test_gold_plans_load_for_every_musique_dev_question(shared_data) -> None:
    questions = load_questions(shared_data / "musique_dev.jsonl")
    assert len(questions) == 200
    for q in questions:
        plan = gold_plan(q)
        assert plan.source == "gold" and len(plan.steps) == len(q.decomposition) >= 2
        assert plan.levels()[0]  # something to start from
        final = plan.steps[-1]
        assert final.depends_on  # the last step builds on earlier answers
        answers = {i: d["answer"] for i, d in enumerate(q.decomposition)}
        assert "#" not in substitute(final.text, answers)
    chains = sum(len(gold_plan(q).levels()) == len(gold_plan(q).steps) for q in questions)
    assert chains < len(questions)  # some 3-4 hop plans have parallel steps
    assert direct(questions[0].question).steps == (Step(questions[0].question),)
