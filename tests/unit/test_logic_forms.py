"""ROGRAG's logic forms: the schema's rules, level-by-level execution batched across questions
(one lookup call per level), and 2Wiki comparison questions run with their gold evidence as the
lookup (an oracle answerer read from the data, so the operators are measured apart from any
model)."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

from graphrag_engine.methods.rograg.logic_forms import (
    LogicForm,
    LogicStep,
    execute,
    logic_form_schema,
)
from graphrag_engine.models.structured import ParseError


def _form(*steps: dict) -> str:
    base = {"inputs": [], "relation": "none", "bound": "", "label": ""}
    return json.dumps({"steps": [base | s for s in steps]})


def _key(name: str) -> str:
    """A person's name as the evidence lists it and as it is asked: no disambiguation in
    parentheses, no accents ("Léonide Moguy" and "Leonide Moguy" are one)."""
    bare = re.sub(r"\s*\(.*\)$", "", name)
    return unicodedata.normalize("NFKD", bare).encode("ascii", "ignore").decode().lower()


def test_the_schema_rejects_bad_references_operators_and_fields() -> None:
    schema = logic_form_schema(4)
    ok = schema.parse(
        _form(
            {"operator": "retrieve", "query": "When was Pál Gábor born?"},
            {"operator": "retrieve", "query": "When was Shawn Levy born?"},
            {
                "operator": "compare",
                "query": "Who is younger?",
                "inputs": [1, 2],
                "relation": "later",
            },
        )
    )
    assert [s.operator for s in ok.steps] == ["retrieve", "retrieve", "compare"]
    assert ok.levels() == [[0, 1], [2]]
    bad = [
        _form(
            {"operator": "retrieve", "query": "Who directed #2?"},
            {"operator": "retrieve", "query": "What film?"},
        ),
        _form({"operator": "eval", "query": "__import__('os')"}),
        _form(
            {"operator": "retrieve", "query": "a b c"},
            {"operator": "compare", "query": "which?", "inputs": [1]},
        ),
        _form(
            {"operator": "retrieve", "query": "Which films?"},
            {
                "operator": "filter",
                "query": "When?",
                "inputs": [1],
                "relation": "later",
                "bound": "1990",
            },
        ),
        _form(
            {"operator": "retrieve", "query": "a b c"},
            {"operator": "count", "query": "how many", "inputs": [2]},
        ),
        # what SmolLM2 wrote when the grammar let any operator take any inputs
        _form({"operator": "compare", "query": "Which opened first?", "relation": "earlier"}),
        _form(
            {"operator": "retrieve", "query": "When did A open?"},
            {"operator": "retrieve", "query": "When did B open?"},
            {"operator": "compare", "query": "Which first?", "inputs": [1, 2]},
        ),
        _form(
            {"operator": "retrieve", "query": "When did A open?"},
            {"operator": "retrieve", "query": "When did B open?", "bound": "1990"},
        ),
    ]
    for text in bad:
        with pytest.raises(ParseError):
            schema.parse(text)


def test_the_format_line_offers_each_position_only_its_operators() -> None:
    """Drawn from the same schema as the grammar: step 1 can only retrieve (nothing earlier to
    read), step 2 adds the one-input operators."""
    line = logic_form_schema(4).describe()
    first, second = line.split("}, {")[:2]
    assert '"operator": "retrieve",' in first and '"inputs": []' in first
    assert '"operator": "retrieve" or "filter" or "count",' in second
    assert '"inputs": [] or [1]' in second


def test_planted_code_in_an_answer_stays_text() -> None:
    form = LogicForm(
        (
            LogicStep("retrieve", "When was A born?", label="A"),
            LogicStep("retrieve", "When was B born?", label="B"),
            LogicStep("compare", "Who is older?", (0, 1), "earlier"),
            LogicStep("retrieve", "What did #1 say?"),
        )
    )
    planted = "__import__('os').system('touch /tmp/pwned')"
    hist = execute([form], lambda texts: [planted if "A" in t else "1970" for t in texts])[0]
    assert not hist.results[2].ok and "cannot compute" in hist.results[2].text
    assert hist.asked[3] == f"What did {planted} say?"  # substituted as text, nothing run
