"""Structured output: JSON repair and LightRAG-style delimited records."""

from __future__ import annotations

import pytest

from engine.models.structured import ParseError, parse_delimited, parse_json


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
    ],
)
def test_parse_json_repairs(text: str, expected) -> None:
    assert parse_json(text) == expected


@pytest.mark.parametrize("text", ["no json here", "", "{{{{"])
def test_parse_json_refuses(text: str) -> None:
    with pytest.raises(ParseError):
        parse_json(text)


LIGHTRAG = (
    '("entity"<|>"Hana Lirrow"<|>"person"<|>"Architect born in Port Calloway.")##\n'
    '("entity"<|>"Quillon Opera House"<|>"organization"<|>"Opera house in Vesk.")##\n'
    '("relationship"<|>"Hana Lirrow"<|>"Quillon Opera House"<|>"She designed it."<|>"design, architecture"<|>9)##\n'
    '("content_keywords"<|>"architecture, opera")<|COMPLETE|>'
)


def test_parse_delimited_records() -> None:
    out = parse_delimited(LIGHTRAG)
    assert out.complete and out.dropped_partial == 0
    assert [r[0] for r in out.records] == ["entity", "entity", "relationship", "content_keywords"]
    assert out.records[2] == [
        "relationship",
        "Hana Lirrow",
        "Quillon Opera House",
        "She designed it.",
        "design, architecture",
        "9",
    ]


def test_parse_delimited_truncated_record_dropped_not_guessed() -> None:
    cut = LIGHTRAG[: LIGHTRAG.index("She designed")]
    out = parse_delimited(cut)
    assert not out.complete and out.dropped_partial == 1
    assert [r[1] for r in out.records] == ["Hana Lirrow", "Quillon Opera House"]
    with pytest.raises(ParseError, match="ended before"):
        parse_delimited(cut, require_complete=True)
    with pytest.raises(ParseError, match="no delimited records"):
        parse_delimited("I could not find any entities.")
