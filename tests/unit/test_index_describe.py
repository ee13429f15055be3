"""LLM-free descriptions: sentences kept per entity and relation (bounded, most informative
first), keywords the content words of the relation's sentences, and an LLM's descriptions kept
where it gave them."""

from __future__ import annotations

from graphrag_engine.descriptions import MAX_SENTENCE_CHARS, SentencePicks, clip, content_words
from graphrag_engine.index.extract import ChunkExtraction
from graphrag_engine.index.resolve import resolve

UNITS = [
    ("u1", "c1", [("Marie Curie", "PERSON"), ("Warsaw", "GPE")], "Marie Curie was born in Warsaw."),
    (
        "u2",
        "c1",
        [("Marie Curie", "PERSON"), ("Pierre Curie", "PERSON"), ("Sorbonne", "ORG")],
        "Marie Curie and Pierre Curie taught physics at the Sorbonne.",
    ),
    ("u3", "c2", [("Marie Curie", "PERSON")], "Marie Curie won two Nobel prizes."),
    (
        "u4",
        "c2",
        [("Marie Curie", "PERSON"), ("Warsaw", "GPE")],
        "Marie Curie left Warsaw in 1891.",
    ),
]


def _by_name(entities: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in entities}


def test_entities_and_relations_are_described_by_their_sentences() -> None:
    entities, _, relations = resolve(UNITS, entity_sentences=2, relation_sentences=2)
    named = _by_name(entities)
    # the sentence naming three entities comes first, then the first seen
    assert named["Marie Curie"]["description"] == (
        "Marie Curie and Pierre Curie taught physics at the Sorbonne. "
        "Marie Curie was born in Warsaw."
    )
    ids = {e["name"]: e["entity_id"] for e in entities}
    pair = {tuple(sorted((r["src"], r["dst"]))): r for r in relations}
    warsaw = pair[tuple(sorted((ids["Marie Curie"], ids["Warsaw"])))]
    assert warsaw["weight"] == 2.0
    assert warsaw["description"].split("\n") == [
        "Marie Curie was born in Warsaw.",
        "Marie Curie left Warsaw in 1891.",
    ]
    assert warsaw["keywords"] == "left"  # names, stopwords, "born" and numbers are not keywords
    sorbonne = pair[tuple(sorted((ids["Pierre Curie"], ids["Sorbonne"])))]
    assert sorbonne["keywords"] == "marie, taught, physics"  # only the two ends are left out


def test_without_sentences_the_old_co_occurrence_records_stay() -> None:
    entities, _, relations = resolve(UNITS)
    assert all(e["description"] is None for e in entities)
    assert all(r["description"] is None and r["keywords"] == "co-occurrence" for r in relations)
    three = [(u, c, m) for u, c, m, _ in UNITS]  # units without texts are accepted as before
    assert resolve(three)[2] == relations


def test_an_llm_description_is_kept() -> None:
    found = ChunkExtraction(
        entities=[("Marie Curie", "PERSON", "Physicist and chemist.")],
        relations=[("Marie Curie", "Warsaw", "Curie was born in Warsaw.", "birthplace", 9.0)],
    )
    entities, _, relations = resolve(UNITS, [("c1", found)], 3, 2)
    assert _by_name(entities)["Marie Curie"]["description"] == "Physicist and chemist."
    assert _by_name(entities)["Warsaw"]["description"].startswith("Marie Curie was born")
    ids = {e["name"]: e["entity_id"] for e in entities}
    rel = next(r for r in relations if {r["src"], r["dst"]} == {ids["Marie Curie"], ids["Warsaw"]})
    assert (rel["description"], rel["keywords"]) == ("Curie was born in Warsaw.", "birthplace")


def test_picks_are_bounded_distinct_and_clipped() -> None:
    picks = SentencePicks(2)
    for i in range(10):
        picks.offer("k", f"sentence {i}", named=i % 3)
    picks.offer("k", "sentence 2", named=5)  # already kept: not twice
    assert picks.texts("k") == ["sentence 2", "sentence 5"]
    long = "word " * 200
    assert len(clip(long)) <= MAX_SENTENCE_CHARS + 4 and clip(long).endswith(" ...")
    assert SentencePicks(0).texts("k") == []


def test_content_words_skip_names_and_stopwords() -> None:
    words = content_words(["The Eiffel Tower stands in Paris, Paris is a city."], ["Paris"])
    assert words == ["eiffel", "tower", "stands", "city"]
