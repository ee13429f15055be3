"""Answer schemas the coming methods need, kept here until their methods exist: ROGRAG's
logic-form plan and its argument check's support verdict (ReGraphRAG's perspectives live in
engine/retrieve/perspectives.py, PankRAG's plan in engine/retrieve/plans.py). Each is a `Schema` (JSON schema plus
the method's own rules) exactly as a method file would declare it.
"""

from __future__ import annotations

from engine.models.structured import ParseError, Schema, json_object

_TEXT = {"type": "string", "minLength": 3, "maxLength": 120}


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
