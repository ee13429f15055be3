"""Ingest: every format, content-hash ids, duplicates, and every bad input (file:line, exit 2). (the part that needs models, servers or real data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.store import open_index
from tests.unit.test_ingest import BAD_CASES, jsonl, read_all


@pytest.mark.parametrize(
    ("name", "content", "line", "what"), [c for c in BAD_CASES if c[0].endswith(".jsonl")]
)
def test_skip_bad_skips_and_counts(tmp_path: Path, capsys, name, content, line, what) -> None:
    bad = tmp_path / name
    bad.write_bytes(content)
    docs, reader = read_all([bad], skip_bad=True)
    assert [d.title for d in docs] == ["ok"] and reader.stats.skipped_bad == 1
    assert what in reader.stats.bad_examples[0]
    assert main(["index", str(bad), "--out", str(tmp_path / "idx"), "--skip-bad"]) == 0
    idx = open_index(tmp_path / "idx")
    assert idx.rows("documents") == 1 and idx.manifest["stats"]["ingest"]["skipped_bad"] == 1


def test_failed_run_keeps_previous_index(tmp_path: Path) -> None:
    good = jsonl(tmp_path / "good.jsonl", [{"title": "A", "text": "alpha"}])
    out = tmp_path / "idx"
    assert main(["index", str(good), "--out", str(out)]) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"title": "A", "text": "alpha"}\n{"title": "B"}\n')
    assert main(["index", str(bad), "--out", str(out)]) == 2
    idx = open_index(out)
    assert idx.generation == 1 and idx.table("documents")["title"].to_pylist() == ["A"]


def test_real_corpus_ids_match_shared_data(shared_data: Path) -> None:
    docs, reader = read_all([shared_data / "musique_corpus.jsonl"])
    assert reader.stats.records == 3141 and reader.stats.skipped_bad == 0
    assert len(docs) + reader.stats.duplicates == 3141
    assert all(d.external_id.startswith("musique:") for d in docs)
    assert len({d.doc_id for d in docs}) == len(docs)


def test_one_id_on_two_texts_is_counted_or_refused(tmp_path: Path, capsys) -> None:
    p = tmp_path / "c.jsonl"
    rows = [
        {"id": "7", "title": "A", "text": "First text."},
        {"id": "7", "title": "A", "text": "First text."},  # an exact duplicate, not a conflict
        {"id": "7", "title": "A", "text": "Another text."},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    docs, reader = read_all([p])
    assert len(docs) == 2 and reader.stats.id_conflicts == 1 and reader.stats.duplicates == 1
    assert main(["index", str(p), "--out", str(tmp_path / "i"), "--strict-ids"]) == 2
    assert "id '7' was given to another text" in capsys.readouterr().err
    assert main(["index", str(p), "--out", str(tmp_path / "i")]) == 0
    assert "1 records reuse a corpus id" in capsys.readouterr().err
