"""Question loaders on every file of ../shared/data, the demo set and bad input. (the part that needs models, servers or real data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.eval.datasets import load_questions

# (file, questions, kind) as listed in ../shared/data/README.md
SETS = [
    ("musique_dev.jsonl", 200, "passage"),
    ("2wikimultihopqa_dev.jsonl", 284, "passage"),
    ("hotpotqa_dev.jsonl", 450, "passage"),
    ("hotpotqa_train.jsonl", 100, "passage"),
    ("musique_train.jsonl", 100, "passage"),
    ("multihoprag_dev.jsonl", 334, "evidence"),
    ("ultradomain_cs_dev.jsonl", 41, "abstract"),
    ("webqsp_dev.jsonl", 1101, "kbqa"),
]


@pytest.mark.parametrize(("name", "count", "kind"), SETS)
def test_every_shared_file_loads(shared_data: Path, name: str, count: int, kind: str) -> None:
    qs = load_questions(shared_data / name)
    assert len(qs) == count
    assert {q.kind for q in qs} == {kind}
    assert len({q.qid for q in qs}) == count
    assert all(q.question.strip() for q in qs)
    if kind == "passage":
        assert all(q.answers and q.supporting_ids for q in qs)
        assert all(len(q.supporting_ids) == len(q.supporting_titles) for q in qs)
    if kind == "evidence":
        # null queries have no evidence; every other query has verbatim facts
        assert sum(bool(q.evidence) for q in qs) > 0.8 * count
        assert all(q.supporting_ids is None for q in qs)
    if kind == "kbqa":
        assert all(q.triples is not None for q in qs)
        assert sum(bool(q.triples) for q in qs) > 0.9 * count


def test_gold_passages_exist_in_the_corpus(shared_data: Path) -> None:
    ids = {json.loads(x)["id"] for x in (shared_data / "musique_corpus.jsonl").open()}
    qs = load_questions(shared_data / "musique_dev.jsonl")
    assert all(set(q.supporting_ids) <= ids for q in qs)


def test_cli_bad_questions_exit_2(tmp_path: Path, demo_index: Path, capsys) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"question": "fine"}\n{oops\n')
    code = main(
        [
            "query",
            str(demo_index),
            str(f),
            "--method",
            "bm25",
            "--retrieval-only",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"{f}:2: not valid JSON" in err[0]
    assert not (tmp_path / "r" / "results.parquet").exists()
