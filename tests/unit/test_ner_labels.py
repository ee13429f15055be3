"""Which entity labels a graph leaves out: the setting's default follows LinearRAG's public
code, mentions are filtered by label, and an index built before the setting existed tags its
questions the way it was built."""

from __future__ import annotations

from graphrag_engine.config import GraphConfig
from graphrag_engine.models.ner import NUMERIC_LABELS, skip_labels
from graphrag_engine.retrieve.context import skipped_labels


def test_default_leaves_out_counts_and_ranks_only() -> None:
    assert sorted(GraphConfig().ner_skip_labels) == ["CARDINAL", "ORDINAL"]
    assert {"CARDINAL", "ORDINAL"} < set(NUMERIC_LABELS)


def test_mentions_are_dropped_by_label_only() -> None:
    found = [
        [("Edda Marrow", "PERSON"), ("1887", "DATE"), ("third", "ORDINAL"), ("two", "CARDINAL")],
        [],
        [("40 percent", "PERCENT"), ("Varnholt", "GPE")],
    ]
    assert skip_labels(found, ["CARDINAL", "ORDINAL"]) == [
        [("Edda Marrow", "PERSON"), ("1887", "DATE")],
        [],
        [("40 percent", "PERCENT"), ("Varnholt", "GPE")],
    ]
    assert skip_labels(found, NUMERIC_LABELS) == [
        [("Edda Marrow", "PERSON")],
        [],
        [("Varnholt", "GPE")],
    ]
    assert skip_labels(found, []) == found


def test_questions_skip_what_their_index_skipped() -> None:
    assert skipped_labels({"alpha": 0.0, "ner_skip_labels": ["DATE"]}) == ("DATE",)
    # built before the setting existed: every numeric label was left out
    assert skipped_labels({"alpha": 0.0, "entity_sentences": 3}) == tuple(NUMERIC_LABELS)
    # no graph config recorded (an imported graph): today's default
    assert skipped_labels({}) == ("CARDINAL", "ORDINAL")
