"""CLI end to end on the demo corpus and on real data: index, info, placeholders, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import corpus_path, questions_path


def test_demo_corpus_is_well_formed() -> None:
    docs = [json.loads(line) for line in corpus_path().read_text().splitlines()]
    questions = [json.loads(line) for line in questions_path().read_text().splitlines()]
    assert 30 <= len(docs) <= 60 and len(questions) >= 40
    ids = {d["id"] for d in docs}
    assert len(ids) == len(docs)
    titles = {d["id"]: d["title"] for d in docs}
    texts = {d["id"]: d["text"] for d in docs}
    multi = 0
    for q in questions:
        assert q["answer"] and q["supporting_passage_ids"]
        assert set(q["supporting_passage_ids"]) <= ids
        assert q["supporting_titles"] == [titles[i] for i in q["supporting_passage_ids"]]
        gold_text = " ".join(texts[i] for i in q["supporting_passage_ids"])
        answers = [q["answer"], *q["answer_aliases"]]
        assert any(a.removeprefix("the ") in gold_text for a in answers), q["id"]
        multi += len(q["supporting_passage_ids"]) >= 2
    assert multi >= 40, "multi-hop questions need two or three documents"


def test_bad_config_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("chunking:\n  sise: 3\n")
    assert main(["index", "--demo", "--out", str(tmp_path / "i"), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{cfg}:2: unknown key 'chunking.sise'" in err[0]


def test_bench_points_to_the_scripts(capsys) -> None:
    assert main(["bench"]) == 2
    assert "bench/" in capsys.readouterr().err


def test_info_on_missing_index(tmp_path: Path, capsys) -> None:
    assert main(["info", str(tmp_path)]) == 2
    assert "no index here" in capsys.readouterr().err


def test_index_without_corpus(tmp_path: Path, capsys) -> None:
    assert main(["index", "--out", str(tmp_path / "x")]) == 2
    assert "give CORPUS" in capsys.readouterr().err


def test_a_corpus_without_documents_says_what_was_skipped(tmp_path: Path, capsys) -> None:
    """Real run and dry run give the same message: the corpus, bad records, duplicates."""
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"id": "a"}\nnot json\n')
    for extra in ([], ["--dry-run"]):
        args = ["index", str(corpus), "--out", str(tmp_path / "x"), "--skip-bad", *extra]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"{corpus}: no documents to index (2 bad records skipped, 0 duplicates)" in err
        assert not (tmp_path / "x" / "manifest.json").exists()


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_limit_below_one_is_refused_before_anything_runs(tmp_path, capsys, limit) -> None:
    """`--limit 0` and `--limit -1` used to run one question; now exit 2 and write nothing."""
    out = tmp_path / "run"
    args = ["query", "none", "demo", "--method", "none", "--limit", limit, "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--limit {limit}: give 1 or more questions" in err
    assert not out.exists() or not any(out.iterdir())


def test_export_offers_every_format_the_exporter_writes() -> None:
    """The parser (kept free of the exporter's imports) lists exactly the exporter's formats."""
    from graphrag_engine.cli.parser import build_parser
    from graphrag_engine.export.formats import FORMATS, WRITERS

    export = build_parser()._subparsers._group_actions[0].choices["export"]
    choices = next(a.choices for a in export._actions if a.dest == "format")
    assert list(choices) == list(FORMATS) == list(WRITERS)
