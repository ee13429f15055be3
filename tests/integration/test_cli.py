"""CLI end to end on the demo corpus and on real data: index, info, placeholders, errors. (the part that needs models, servers or real data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import corpus_path
from graphrag_engine.store import open_index


def test_index_demo_and_info(tmp_path: Path, run_cli) -> None:
    out = tmp_path / "demo"
    proc = run_cli("index", "--demo", "--out", str(out), progress=True)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]  # the closing line: true wall time, per stage
    assert last.startswith("indexed 36 documents") and "s wall (ingest_chunk" in last
    assert "embed_chunks" in last and "ner" in last
    # every bar says what it counts; the libraries' unlabelled bars are off
    assert "embed chunks" in proc.stderr and "ner:" in proc.stderr
    assert "Batches" not in proc.stderr and "Loading weights" not in proc.stderr
    idx = open_index(out)
    docs = idx.table("documents")
    assert docs.num_rows == 36
    assert set(docs["external_id"].to_pylist()) == {
        json.loads(x)["id"] for x in corpus_path().read_text().splitlines()
    }
    chunks = idx.table("chunks")
    assert chunks.num_rows >= 36 and set(chunks["doc_id"].to_pylist()) == set(
        docs["doc_id"].to_pylist()
    )
    assert idx.manifest["models"]["tokenizer"] == "all-MiniLM-L6-v2"
    info = run_cli("info", str(out))
    assert info.returncode == 0
    for word in (
        "schema v1",
        "documents",
        "chunks",
        "36",
        "tokenizer=all-MiniLM-L6-v2",
        "stage ingest_chunk",
        "config hash",
    ):
        assert word in info.stdout
    as_json = json.loads(run_cli("info", str(out), "--json").stdout)
    assert as_json == idx.manifest


def test_reindex_is_idempotent(demo_index_copy: Path) -> None:
    out = demo_index_copy  # a first `index --demo`, copied
    first = open_index(out).table("chunks")
    assert main(["index", "--demo", "--out", str(out)]) == 0
    idx = open_index(out)
    assert idx.generation == 2 and idx.table("chunks").equals(first)


def test_config_file_applies_and_is_recorded(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("chunking:\n  chunk_tokens: 24\n  overlap_tokens: 4\n")
    out = tmp_path / "idx"
    assert main(["index", "--demo", "--out", str(out), "--config", str(cfg)]) == 0
    idx = open_index(out)
    assert idx.manifest["config"]["chunking"]["chunk_tokens"] == 24
    assert max(idx.table("chunks")["n_tokens"].to_pylist()) <= 24
    assert idx.rows("chunks") > 80


@pytest.mark.slow
def test_index_real_corpora(tmp_path: Path, shared_data: Path, run_cli) -> None:
    out = tmp_path / "multi"
    cfg = tmp_path / "ingest_only.yaml"
    cfg.write_text("graph:\n  enabled: false\n")
    proc = run_cli(
        "index",
        "--config",
        str(cfg),
        str(shared_data / "musique_corpus.jsonl"),
        str(shared_data / "2wikimultihopqa_corpus.jsonl"),
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    idx = open_index(out)
    assert idx.rows("documents") == 3141 + 7005 - idx.manifest["stats"]["ingest"]["duplicates"]
    ext = set(idx.table("documents", columns=["external_id"])["external_id"].to_pylist())
    gold = json.loads((shared_data / "musique_dev.jsonl").read_text().splitlines()[0])[
        "supporting_passage_ids"
    ]
    assert set(gold) <= ext
    assert idx.rows("chunks") >= idx.rows("documents")


def test_unusable_paths_and_arguments_are_one_line_exit_2(
    tmp_path: Path, demo_index: Path, capsys
) -> None:
    """--out that is a file, --config that is a folder, --k that is not numbers, and a run
    folder whose results or summary are damaged: one line on stderr, exit 2."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    query = ["query", str(demo_index), "demo", "--method", "bm25", "--retrieval-only"]
    run = tmp_path / "run"
    cases = [
        ([*query, "--out", str(afile)], "is a file; give a folder path"),
        (
            ["index", "--demo", "--out", str(tmp_path / "i"), "--config", str(tmp_path)],
            "is a folder",
        ),
        (["eval", str(run), "--k", "abc", "--out", str(tmp_path / "e")], "--k abc: give comma"),
    ]
    assert main([*query, "--limit", "2", "--out", str(run)]) == 0
    for args, message in cases:
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    (run / "summary.json").write_text('{"questions": 2')  # cut short
    assert main(["eval", str(run), "--out", str(tmp_path / "e")]) == 2
    assert "summary.json: not a readable summary" in capsys.readouterr().err
    (run / "summary.json").unlink()
    data = (run / "results.parquet").read_bytes()
    (run / "results.parquet").write_bytes(data[: len(data) // 2])
    assert main(["eval", str(run), "--out", str(tmp_path / "e")]) == 2
    assert "results.parquet: not a readable results file" in capsys.readouterr().err


def test_index_into_a_damaged_target_stops_first_and_force_rebuilds(tmp_path: Path, capsys) -> None:
    out = tmp_path / "idx"
    out.mkdir()
    (out / "manifest.json").write_text('{"format": "graphrag-engine-index", "schema_ver')
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "1", "title": "Tam", "text": "Tam Ries sails."}) + "\n")
    assert main(["index", str(corpus), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "move the folder aside" in err[0] and "--force" in err[0]
    assert sorted(p.name for p in out.iterdir()) == [".lock", "manifest.json"]  # no work done
    assert main(["index", str(corpus), "--out", str(out), "--force"]) == 0
    assert main(["info", str(out)]) == 0


def test_demo_picks_every_method_that_can_run_on_its_index(demo_index: Path) -> None:
    """The demo runs every registered method but the closed-book one, LEGO on the index's
    entity graph; global search, the tree methods and KET-RAG are left out naming the community
    reports, trees and skeleton this index lacks (the demo's own index has both: bench.demo runs them all)."""
    from graphrag_engine.api import Engine
    from graphrag_engine.cli.demo import demo_configs
    from graphrag_engine.methods import method_names

    configs, skipped = demo_configs(Engine(demo_index), llm=True, answers=True)
    built_only = {"graphrag_global", "drift", "lazygraphrag", "raptor", "sirerag", "ketrag"}
    assert set(configs) == set(method_names()) - {"none", *built_only}
    assert "community_reports" in skipped["graphrag_global"]  # the fixture has no communities
    assert "community_reports" in skipped["drift"]
    assert "communities" in skipped["lazygraphrag"]
    assert "tree" in skipped["raptor"] and "related_tree" in skipped["sirerag"]  # nor trees
    assert "skeleton" in skipped["ketrag"]  # nor KET-RAG's skeleton
    assert configs["lego"].options.graph == "index"
    assert all(c.models.llm.backend == "transformers" for c in configs.values())
    assert all(c.generation.enabled for c in configs.values())
    without, skipped = demo_configs(Engine(demo_index), llm=False, answers=False)
    assert {"hyde", "pankrag", "rograg", "regraphrag", "lightrag"} <= set(skipped)
    assert "bm25" in without and not without["bm25"].generation.enabled


def test_demo_table_and_report_match_the_runs(demo_index: Path, tmp_path: Path, capsys) -> None:
    """`graphrag-engine demo` reuses a whole index in OUT, runs the chosen methods (SmolLM2
    plans PankRAG's steps and answers), prints one row per method equal to its run's own
    rows, and writes the report with its plots."""
    import shutil

    import pyarrow.parquet as pq

    from graphrag_engine.eval.metrics import recall_at_k, token_f1

    shutil.copytree(demo_index, tmp_path / "index")
    methods = ["bm25", "lego", "pankrag"]
    args = ["demo", "--out", str(tmp_path), "--questions", "1"]
    assert main([*args, *(x for m in methods for x in ("--method", m))]) == 0
    out = capsys.readouterr().out
    assert "already holds the demo index" in out
    assert "running 3 methods over 1 demo question" in out
    for method in methods:
        rows = pq.read_table(tmp_path / "runs" / method / "results.parquet").to_pylist()
        assert len(rows) == 1 and all(r["answer"] is not None for r in rows)
        recall = sum(recall_at_k(r["retrieved_ids"], r["supporting_ids"], 5) for r in rows)
        f1 = sum(token_f1(r["answer"], r["gold_answers"]) for r in rows)
        cells = next(x for x in out.splitlines() if x.startswith(method + " ")).split()
        assert float(cells[1]) == pytest.approx(recall, abs=0.005)
        assert float(cells[3]) == pytest.approx(f1, abs=0.005)
    lego = pq.read_table(tmp_path / "runs" / "lego" / "results.parquet").to_pylist()
    assert all(r["retrieved_ids"] for r in lego), "LEGO on the index ranks its paths' passages"
    report = (tmp_path / "report" / "report.md").read_text()
    assert (
        "## cost" in report and "![quality against cost per question](cost_quality.png)" in report
    )
    for png in ("cost_quality.png", "recall_at_k.png"):
        assert (tmp_path / "report" / png).stat().st_size > 1000


def test_ask_answers_one_typed_question_with_each_method(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """`ask` runs a batch of one through every --method: the answer (SmolLM2 here), the context
    the prompt held, its passages, and the tokens and seconds; the run folders are kept."""
    question = "Which harbour town did Ilsa Varnholt sail from?"
    args = ["ask", str(demo_index), question, "--method", "bm25", "--method", "naive"]
    assert main([*args, "--retrieval-only", "--out", str(tmp_path / "ro")]) == 0
    out = capsys.readouterr().out
    assert "== bm25 (bm25)" in out and "== naive (naive)" in out
    assert out.count("answer: (retrieval only)") == 2 and out.count("sources: ") == 2
    assert "context [1]" in out and "seconds: " in out
    rows = json.loads((tmp_path / "ro" / "bm25" / "summary.json").read_text())
    assert rows["questions"] == 1 and rows["label"] == "bm25"
    llm = ["--method", "naive", "--llm-backend", "transformers", "--out", str(tmp_path / "a")]
    assert main(["ask", str(demo_index), question, *llm]) == 0
    out = capsys.readouterr().out
    answer = next(line for line in out.splitlines() if line.startswith("answer: "))
    assert answer != "answer: (retrieval only)" and len(answer) > len("answer: ")
    assert '"answer_prompt"' in out or "tokens: " in out
    assert main(["ask", str(demo_index), "  ", "--method", "bm25", "--retrieval-only"]) == 2
    # without --out the runs go to a temporary folder that is gone when `ask` returns
    import tempfile

    def leftovers() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).glob("graphrag-ask-*")}

    before = leftovers()
    assert main(["ask", str(demo_index), question, "--method", "bm25", "--retrieval-only"]) == 0
    assert "== bm25 (bm25)" in capsys.readouterr().out
    assert leftovers() == before
