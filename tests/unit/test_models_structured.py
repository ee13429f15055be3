"""Structured output: JSON repair, and a stage schema's validation, rules and format line."""

from __future__ import annotations

import pytest

from graphrag_engine.models.structured import ParseError, Schema, parse_json


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1, "b": [1, 2]}', {"a": 1, "b": [1, 2]}),
        ('Sure! Here it is:\n```json\n{"a": "x"}\n```\nAnything else?', {"a": "x"}),
        ("```\n[1, 2, 3]\n```", [1, 2, 3]),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        (
            'The answer: {"name": "Vesk", "island": "Quillon"} as requested.',
            {"name": "Vesk", "island": "Quillon"},
        ),
        # truncated by max_tokens: open strings and brackets are closed, a dangling key dropped
        (
            '{"entities": [{"name": "Hana Lirrow", "type": "person"}, {"name": "Ves',
            {"entities": [{"name": "Hana Lirrow", "type": "person"}, {"name": "Ves"}]},
        ),
        ('{"a": 1, "b": ', {"a": 1}),
        ('{"a": 1, "b"', {"a": 1}),
        ('{"list": [1, 2, 3', {"list": [1, 2, 3]}),
        ('{"s": "quote \\" inside', {"s": 'quote " inside'}),
        # a raw line break inside a string (llama.cpp's JSON grammar lets one through) is kept
        ('{"d": "line one\nline two"}', {"d": "line one\nline two"}),
    ],
)
def test_parse_json_repairs(text: str, expected) -> None:
    assert parse_json(text) == expected


@pytest.mark.parametrize("text", ["no json here", "", "{{{{"])
def test_parse_json_refuses(text: str) -> None:
    with pytest.raises(ParseError):
        parse_json(text)


def _acyclic(value: dict) -> dict:
    """A stage rule beyond the schema: every dependency names an earlier step."""
    for i, step in enumerate(value["steps"]):
        if any(d >= i for d in step["after"]):
            raise ParseError(f"step {i} depends on a later step")
    return value


PLAN = Schema(
    {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "q": {"type": "string", "minLength": 1, "description": "sub-question"},
                        "after": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                        "kind": {"enum": ["local", "global"]},
                        "weight": {"type": "integer", "minimum": 1, "maximum": 5},
                    },
                    "required": ["q", "after", "kind", "weight"],
                    "additionalProperties": False,
                },
                "minItems": 1,
                "maxItems": 3,
            }
        },
        "required": ["steps"],
        "additionalProperties": False,
    },
    _acyclic,
)


def test_schema_validates_then_applies_the_stage_rule() -> None:
    ok = '{"steps": [{"q": "Who?", "after": [], "kind": "local", "weight": 2}, {"q": "When?", "after": [0], "kind": "global", "weight": 5}]}'
    assert [s["q"] for s in PLAN.parse(ok)["steps"]] == ["Who?", "When?"]
    # fenced and wrapped in prose: the tolerant reader still finds it
    assert PLAN.parse(f"Here:\n```json\n{ok}\n```")["steps"][1]["after"] == [0]
    bad = {
        "": "empty answer",
        '{"steps": []}': "steps: .* should be non-empty",
        '{"steps": [{"q": "Who?", "after": [], "kind": "both", "weight": 2}]}': "steps/0/kind",
        '{"steps": [{"q": "Who?", "after": [], "kind": "local", "weight": 9}]}': "steps/0/weight",
        '{"steps": [{"q": "Who?", "after": [], "kind": "local", "weight": 1, "x": 1}]}': "steps/0",
        '{"steps": [{"q": "Who?", "after": [0], "kind": "local", "weight": 1}]}': "later step",
        '["Who?"]': "top level",
    }
    for text, why in bad.items():
        with pytest.raises(ParseError, match=why):
            PLAN.parse(text)


def test_schema_describes_its_format_in_one_line() -> None:
    line = PLAN.describe()
    assert "\n" not in line
    assert line == (
        '{"steps": [{"q": "<sub-question>", "after": [<integer>, ...], '
        '"kind": "local" or "global", "weight": <integer 1-5>}, ... (at most 3)]}'
    )


def test_a_schema_the_validator_cannot_read_is_refused_at_first_use() -> None:
    broken = Schema({"type": "object", "properties": {"a": {"type": "no-such-type"}}})
    with pytest.raises(Exception, match="no-such-type"):
        broken.parse('{"a": 1}')
