"""Scheduled re-index on real MuSiQue passages: a source folder gains 10% new documents, 5
change and 5 are deleted; the re-index extracts and embeds only what is new, equals a full
rebuild of the new source, writes nothing when run again, and refuses to overlap."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.index.reindex import REINDEX_LOCK
from graphrag_engine.store import open_index
from tests.index_compare import assert_same_index

pytestmark = pytest.mark.slow

N_DOCS = 100


def write_source(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "passages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.fixture(scope="module")
def passages(shared_data) -> list[dict]:
    out = []
    with (shared_data / "musique_corpus.jsonl").open() as fh:
        for line in fh:
            out.append(json.loads(line))
            if len(out) == N_DOCS + N_DOCS // 10:
                return out
    raise AssertionError("musique_corpus.jsonl holds too few passages")


def edited(passages: list[dict]) -> tuple[list[dict], set[str]]:
    """The source after a day: docs 0-4 deleted, 5-9 changed, 10% new ones appended."""
    old, new = passages[:N_DOCS], passages[N_DOCS:]
    changed = [{**r, "text": r["text"] + " This passage was revised."} for r in old[5:10]]
    touched = {r["id"] for r in changed + new}
    return changed + old[10:] + new, touched


def test_reindex_touches_only_changes_and_equals_a_rebuild(
    passages, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphrag_engine.exec import local as local_exec
    from graphrag_engine.index import build as build_module

    # NER worker processes: a fresh build of 50 chunks or more starts them early, a re-index
    # (its NER cache filled) does not; the executor's own threshold is put out of reach
    monkeypatch.setattr(build_module, "NER_EARLY_FROM", 50)
    monkeypatch.setattr(local_exec, "NER_WORKERS_FROM", 10**9)
    src, index = tmp_path / "src", tmp_path / "index"
    write_source(src, passages[:N_DOCS])
    assert main(["reindex", str(src), "--out", str(index)]) == 0
    before = open_index(index)
    assert before.rows("documents") == N_DOCS
    assert before.manifest["stats"]["stages"]["ner"]["worker_processes"] >= 2

    # unchanged source: nothing is written, the generation stays
    assert main(["reindex", str(src), "--out", str(index)]) == 0
    assert open_index(index).generation == before.generation

    records, touched = edited(passages)
    write_source(src, records)
    old_units = set(before.table("units", columns=["text"])["text"].to_pylist())
    assert main(["reindex", str(src), "--out", str(index)]) == 0
    after = open_index(index)
    assert after.generation == before.generation + 1
    docs = after.table("documents").to_pylist()
    assert {d["external_id"] for d in docs} == {r["id"] for r in records}
    stages = after.manifest["stats"]["stages"]

    # only the text of new and changed documents went through the models
    doc_of = {d["doc_id"]: d["external_id"] for d in docs}
    chunk_doc = after.table("chunks", columns=["doc_id"])["doc_id"].to_pylist()
    assert stages["embed_chunks"]["embedded"] == sum(doc_of[d] in touched for d in chunk_doc)
    unit_texts = after.table("units", columns=["text"])["text"].to_pylist()
    assert 0 < stages["ner"]["tagged"] == len(set(unit_texts) - old_units) < len(unit_texts) // 4
    assert stages["ner"]["cached"] == sum(t in old_units for t in unit_texts)
    assert stages["ner"]["worker_processes"] == 0

    # the deleted documents are gone with what only they held: a rebuild from nothing agrees
    full = tmp_path / "full"
    assert main(["index", str(src), "--out", str(full)]) == 0
    assert_same_index(after, open_index(full))
    assert main(["reindex", str(src), "--out", str(index)]) == 0
    assert open_index(index).generation == after.generation


def test_an_overlapping_run_is_refused_and_changes_nothing(passages, tmp_path, capsys) -> None:
    src, index = write_source(tmp_path / "src", passages[:20]), tmp_path / "index"
    assert main(["reindex", str(src), "--out", str(index)]) == 0
    generation = open_index(index).generation
    write_source(src, passages[:25])
    fd = os.open(index / REINDEX_LOCK, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a scheduled run still at work
    try:
        assert main(["reindex", str(src), "--out", str(index)]) == 75
    finally:
        os.close(fd)
    assert "another re-index of this index is running" in capsys.readouterr().err
    assert open_index(index).generation == generation
    assert main(["reindex", str(src), "--out", str(index)]) == 0
    assert open_index(index).rows("documents") == 25
