"""Extractive community reports: title, summary, findings and rating from the corpus alone."""

from __future__ import annotations

from graphrag_engine.index.extractive_reports import KIND_LINE, extractive_reports

ENTITIES = [{"entity_id": e, "name": n} for e, n in
            [("a", "Ada"), ("b", "Bram"), ("c", "Cole"), ("d", "Dora"), ("x", "Xan"), ("y", "Yui")]]  # fmt: skip
RELATIONS = [
    {"src": "a", "dst": "b", "weight": 3.0},
    {"src": "a", "dst": "c", "weight": 1.0},
    {"src": "b", "dst": "c", "weight": 1.0},
    {"src": "c", "dst": "d", "weight": 1.0},
    {"src": "x", "dst": "y", "weight": 1.0},
    {"src": "a", "dst": "x", "weight": 5.0},  # crosses communities: in no report's findings
]
COMMUNITIES = [
    {"community_id": "c1", "level": 0, "entity_ids": ["a", "b", "c", "d"]},
    {"community_id": "c2", "level": 0, "entity_ids": ["x", "y"]},
]
UNITS = [
    ("Dora lives alone.", ["d"]),
    ("Ada met Bram and Cole in town.", ["a", "b", "c"]),
    ("Xan and Yui sail.", ["x", "y"]),
    ("Ada and Bram wrote a book.", ["a", "b"]),
    ("Bram once visited Ada.", ["a", "b"]),
    ("Cole knows Dora.", ["c", "d"]),
    ("Ada met Xan.", ["a", "x"]),
]


def test_report_parts_come_from_the_communitys_own_sentences_and_relations() -> None:
    rows = extractive_reports(COMMUNITIES, ENTITIES, RELATIONS, iter(UNITS))
    assert [r["community_id"] for r in rows] == ["c1", "c2"]
    one, two = rows
    # central members by weighted degree inside: Ada 4, Bram 4, Cole 3 (Dora 1); ties by name
    assert one["title"] == "Ada, Bram and Cole (+1 more)"
    # the three sentences naming the most members (3, then 2s by centrality), in corpus order
    assert one["summary"] == (
        "Ada met Bram and Cole in town. Ada and Bram wrote a book. Bram once visited Ada."
    )
    text = one["full_text"].splitlines()
    assert text[0] == KIND_LINE and text[1] == "Members: Ada, Bram, Cole, Dora"
    findings = [line for line in text if line.startswith("- ")]
    assert findings[0] == "- Ada and Bram (weight 3): Ada met Bram and Cole in town."
    assert len(findings) == 4 and not any("Xan" in f for f in findings)
    assert "- Cole and Dora (weight 1): Cole knows Dora." in findings
    # rating: inner weight scaled to the level's largest (6 for c1, 1 for c2)
    assert one["rating"] == 10.0 and two["rating"] == round(10 / 6, 2)
    assert two["title"] == "Xan and Yui" and two["summary"] == "Xan and Yui sail. Ada met Xan."


def test_a_community_no_sentence_names_still_gets_a_report() -> None:
    rows = extractive_reports(COMMUNITIES[1:], ENTITIES, [], iter([]))
    assert rows[0]["title"] == "Xan and Yui" and "no sentence names" in rows[0]["summary"]
    assert rows[0]["rating"] == 0.0 and "Findings" not in rows[0]["full_text"]
