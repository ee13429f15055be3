"""Answer schemas the coming methods need, kept here until their methods exist: PankRAG's
sub-question DAG, ROGRAG's logic-form plan and its argument check's support verdict
(ReGraphRAG's perspectives now live in engine/retrieve/perspectives.py). Each is a `Schema` (JSON schema plus
the method's own rules) exactly as a method file would declare it.
"""

from __future__ import annotations

from engine.models.structured import ParseError, Schema, json_object

_TEXT = {"type": "string", "minLength": 3, "maxLength": 120}


def _acyclic_plan(value: dict) -> list[dict]:
    """Steps whose dependencies all name earlier steps (so the plan is a DAG in order)."""
    steps = value["steps"]
    for i, step in enumerate(steps):
        for d in step["depends_on"]:
            if not 1 <= d <= i:
                raise ParseError(f"step {i + 1} depends on step {d}, which is not an earlier step")
    return steps


DAG = Schema(
    json_object(
        {
            "steps": {
                "type": "array",
                "items": json_object(
                    {
                        "question": _TEXT,
                        "depends_on": {
                            "type": "array",
                            "items": {"type": "integer", "minimum": 1, "maximum": 5},
                            "maxItems": 4,
                        },
                        "scope": {"enum": ["local", "global"]},
                    }
                ),
                "minItems": 1,
                "maxItems": 5,
            }
        }
    ),
    _acyclic_plan,
)
"""PankRAG's plan: 1-5 sub-questions, each naming the earlier steps (1-based) it needs and
whether it asks for a specific fact (local) or a broad theme (global)."""

DAG_PROMPT = """Break the question into the smallest sub-questions that must be answered to answer
it, in order. A sub-question may use the answers of earlier ones: list their step numbers
(starting at 1) in "depends_on". Mark a sub-question "local" when it asks for a specific fact
and "global" when it asks about a broad theme. Reply with one JSON object of this form and
nothing else:
{format}

Question: {question}
JSON:"""


def dag_prompt(question: str) -> str:
    """The planning prompt of one question."""
    return DAG_PROMPT.format(format=DAG.describe(), question=question)


OPERATORS = ["retrieve", "filter", "sort", "compare", "math", "deduce", "output"]


def _ends_in_output(value: dict) -> list[dict]:
    steps = value["steps"]
    if steps[-1]["operator"] != "output" or any(s["operator"] == "output" for s in steps[:-1]):
        raise ParseError('a logic form ends with exactly one "output" step')
    return steps


LOGIC_FORM = Schema(
    json_object(
        {
            "steps": {
                "type": "array",
                "items": json_object({"operator": {"enum": OPERATORS}, "query": _TEXT}),
                "minItems": 2,
                "maxItems": 6,
            }
        }
    ),
    _ends_in_output,
)
"""ROGRAG's logic form: a sequence of (operator, sub-query) from a fixed operator set, ending
in one output step."""

LOGIC_FORM_PROMPT = """Turn the question into a short plan of operations. Each step applies one
operator to a sub-query: retrieve (look a fact up), filter, sort, compare, math (compute),
deduce (infer from earlier steps); the last step is output (state the answer). Reply with one
JSON object of this form and nothing else:
{format}

Question: {question}
JSON:"""


def logic_form_prompt(question: str) -> str:
    """The logic-form prompt of one question."""
    return LOGIC_FORM_PROMPT.format(format=LOGIC_FORM.describe(), question=question)


SUPPORT = Schema(
    json_object(
        {"supported": {"type": "boolean"}, "evidence": {"type": "string", "maxLength": 160}}
    )
)
"""ROGRAG's argument check: does the retrieved text support the answer, with the evidence."""

SUPPORT_PROMPT = """Does the text below support the answer to the question? Quote the supporting
words as evidence (empty when it does not). Reply with one JSON object of this form and
nothing else:
{format}

Text: {text}

Question: {question}
Answer: {answer}
JSON:"""


def support_prompt(question: str, answer: str, text: str) -> str:
    """The support-verdict prompt of one (question, answer, passage)."""
    return SUPPORT_PROMPT.format(
        format=SUPPORT.describe(), text=text, question=question, answer=answer
    )
