"""LLM triple extraction: record parsing and merging, gleaning and loop-NER rounds with the
local model, and the extract stage inside `index`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import corpus_path
from graphrag_engine.index.extract import ChunkExtraction, absorb, extract_triples, triple_schema
from graphrag_engine.index.resolve import entity_id, normalize_name, resolve
from graphrag_engine.models import LLM
from graphrag_engine.models.structured import ParseError
from graphrag_engine.store import open_index

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


TEXTS = [json.loads(line)["text"] for line in corpus_path().read_text().splitlines()[:3]]


@pytest.mark.slow
@pytest.mark.parametrize(("loop", "gleaning"), [("none", 1), ("trial", 0), ("base", 0)])
def test_rounds_are_batched(smollm, loop: str, gleaning: int) -> None:
    llm = LLM(smollm)
    found = extract_triples(
        llm,
        TEXTS,
        ["person", "location"],
        gleaning=gleaning,
        loop=loop,
        max_rounds=2,
        max_tokens=24,
        retries=1,
    )
    usage = llm.ledger.get("extract", smollm.model_id)
    checks = llm.ledger.get("extract_loop_check", smollm.model_id)
    rounds = sum(f.rounds for f in found)
    assert usage.calls + usage.cached_calls == rounds + usage.retries
    assert usage.schema_decoded == usage.calls  # every round decoded under the triple schema
    assert all(1 <= f.rounds <= 3 for f in found)
    if loop == "none":
        assert all(f.rounds == 2 for f in found) and checks.calls == 0
    elif loop == "trial":
        assert checks.calls >= 3  # asked before any continuation
    else:
        assert all(f.rounds >= 2 for f in found) and checks.calls >= 3  # continued before asking
    assert all(f.failures <= f.rounds for f in found)


@pytest.mark.slow
def test_extract_stage_in_index(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(corpus_path().read_text().splitlines()[:4]) + "\n")
    cfg = tmp_path / "x.yaml"
    cfg.write_text(
        "extraction:\n  enabled: true\n  gleaning: 0\n  max_tokens: 48\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 4\n"
    )
    out = tmp_path / "idx"
    dry = main(["index", str(corpus), "--out", str(out), "--config", str(cfg), "--dry-run"])
    assert dry == 0 and not out.exists()  # nothing written: no lock, cache or staging
    line = next(x for x in capsys.readouterr().out.splitlines() if "extract: " in x)
    assert "4 prompts" in line and "~192 completion tokens" in line  # 4 x max_tokens 48
    forecast = int(line.split("prompts, ")[1].split()[0])
    assert main(["index", str(corpus), "--out", str(out), "--config", str(cfg)]) == 0
    stage = open_index(out).manifest["stats"]["stages"]["extract"]
    # the forecast counted the first round's prompts exactly; re-asks repeat a prompt
    assert forecast <= stage["prompt_tokens"] <= forecast * (1 + stage["retries"])
    assert stage["items"] == 4 and stage["rounds"] == 4
    assert stage["model_calls"] == 4 + stage["retries"] == stage["schema_decoded"]
    assert stage["prompt_tokens"] > 0 and stage["completion_tokens"] > 0
    # a dry run over that build: its re-ask rate and mean completion stand in
    capsys.readouterr()
    assert main(["index", str(corpus), "--out", str(out), "--config", str(cfg), "--dry-run"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "extract: " in x)
    assert f"extract: {stage['model_calls']} prompts" in line, line
    assert "last build's mean" in line
    assert main(["index", str(corpus), "--out", str(out), "--config", str(cfg)]) == 0
    again = open_index(out).manifest["stats"]["stages"]["extract"]
    assert again["model_calls"] == 0 and again["cached_calls"] == stage["model_calls"]


@pytest.mark.slow
def test_long_descriptions_are_summarised_in_one_call(smollm) -> None:
    from graphrag_engine.index.extract import summarize_descriptions

    llm = LLM(smollm)
    long = "Hana Lirrow was an architect.\\n" * 10
    entities = [
        {"name": "Hana Lirrow", "description": long},
        {"name": "Vesk", "description": "A city on Quillon."},
        {"name": "Dunmere", "description": None},
    ]
    done = summarize_descriptions(llm, entities, above=100, max_tokens=24)
    usage = llm.ledger.get("summarize_descriptions", smollm.model_id)
    assert usage.calls == 1 and done == 1
    assert entities[0]["description"] != long and entities[0]["description"]
    assert entities[1]["description"] == "A city on Quillon." and entities[2]["description"] is None
