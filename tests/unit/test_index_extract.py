"""LLM triple extraction: record parsing and merging, gleaning and loop-NER rounds with the
local model, and the extract stage inside `index`."""

from __future__ import annotations

import json

import pytest

from graphrag_engine.index.extract import ChunkExtraction, absorb, triple_schema
from graphrag_engine.index.resolve import entity_id, normalize_name, resolve
from graphrag_engine.models.structured import ParseError

ANSWER = json.dumps(
    {
        "entities": [
            {
                "name": "Hana Lirrow",
                "type": "PERSON",
                "description": "An architect born in Port Calloway.",
            },
            {
                "name": " Quillon Opera House",
                "type": "ORGANIZATION",
                "description": "An opera house in Vesk.",
            },
        ],
        "relationships": [
            {
                "source": "Hana Lirrow",
                "target": "Quillon Opera House",
                "description": "Lirrow designed the opera house.",
                "keywords": "design, architecture",
                "strength": 9,
            },
            {
                "source": "Quillon Opera House",
                "target": "Vesk",
                "description": "It stands in Vesk.",
                "keywords": "location",
                "strength": 1,
            },
        ],
        "content_keywords": ["architecture", "opera"],
    }
)


SCHEMA = triple_schema(["person", "organization"])


def test_records_are_absorbed_and_merged_with_cooccurrence() -> None:
    found = ChunkExtraction()
    absorb(found, SCHEMA.parse(ANSWER))
    assert [e[0] for e in found.entities] == ["Hana Lirrow", "Quillon Opera House"]
    assert found.relations[0][4] == 9.0 and found.relations[1][4] == 1.0
    assert found.keywords == ["architecture", "opera"]
    for bad in (
        "I cannot help with that.",
        ANSWER.replace('"PERSON"', '"WIZARD"'),  # a type outside the configured ones
        ANSWER.replace('"strength": 9', '"strength": "high"'),
        ANSWER.replace('"content_keywords"', '"keywords"'),
    ):
        with pytest.raises(ParseError):
            SCHEMA.parse(bad)
    mentions = [("Hana Lirrow", "PERSON"), ("the Quillon Opera House", "ORG")]
    entities, links, relations = resolve([("u1", "c1", mentions)], [("c2", found)])
    by_key = {normalize_name(e["name"]): e for e in entities}
    assert set(by_key) == {"hana lirrow", "quillon opera house", "vesk"}
    assert by_key["hana lirrow"]["description"] == "An architect born in Port Calloway."
    assert (
        by_key["hana lirrow"]["type"] == "PERSON"
        or by_key["hana lirrow"]["type"] == "person".upper()
    )
    assert by_key["hana lirrow"]["chunk_ids"] == ["c1", "c2"]
    pair = sorted((entity_id("hana lirrow"), entity_id("quillon opera house")))
    rel = next(r for r in relations if [r["src"], r["dst"]] == pair)
    assert rel["weight"] == 1.0 + 9.0  # one shared unit + strength 9
    assert rel["description"] == "Lirrow designed the opera house."
    assert rel["keywords"] == "co-occurrence, design, architecture"
    assert links.to_pylist() == [
        {"unit_id": "u1", "entity_id": e}
        for e in (entity_id("hana lirrow"), entity_id("quillon opera house"))
    ]


def test_links_sealed_in_small_batches_equal_one_batch(monkeypatch) -> None:
    """unit_entity made LINK_BATCH rows at a time is the same table, rows in unit order."""
    from graphrag_engine.index import resolve as resolve_module

    units = [
        (f"u{i}", f"c{i // 3}", [(f"Name {j}", "ORG") for j in range(i % 4)] + [("Vesk", "GPE")])
        for i in range(40)
    ]
    whole = resolve(units)
    monkeypatch.setattr(resolve_module, "LINK_BATCH", 2)
    sealed = resolve(units)
    assert sealed[1].num_rows == sum(len(m) for *_, m in units) > 40
    assert sealed[1].column(0).num_chunks > 20 and whole[1].column(0).num_chunks == 1
    assert sealed[1].to_pylist() == whole[1].to_pylist()
    assert sealed[0] == whole[0] and sealed[2] == whole[2]
