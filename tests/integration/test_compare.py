"""`graphrag-engine compare`: several methods over one question file into run folders and one
report, every method's needs checked before the first one runs; the Python API's call does
the same."""

from __future__ import annotations

import csv
import json

from graphrag_engine.cli import main


def test_compare_runs_every_method_into_one_report(demo_index, tmp_path, capsys) -> None:
    out = tmp_path / "cmp"
    args = ["compare", str(demo_index), "demo", "--method", "bm25", "--method", "naive"]
    args += ["--method", "hipporag", "--retrieval-only", "--limit", "6", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    for label in ("bm25", "naive", "hipporag"):
        summary = json.loads((out / "runs" / label / "summary.json").read_text())
        assert summary["questions"] == 6 and summary["label"] == label
        assert f"| {label} |" in printed
    rows = list(csv.DictReader((out / "report" / "summary.csv").open()))
    assert {r["run"] for r in rows} == {"bm25", "naive", "hipporag"}
    recall = {r["run"]: float(r["mean"]) for r in rows if r["metric"] == "recall@5"}
    assert all(0 <= v <= 1 for v in recall.values()) and max(recall.values()) > 0
    assert (out / "report" / "report.md").read_text().strip() in printed


def test_compare_checks_every_methods_needs_before_the_first_runs(run_cli, demo_index, tmp_path):
    out = tmp_path / "cmp"
    proc = run_cli(
        "compare", str(demo_index), "demo", "--method", "bm25", "--method", "graphrag_global",
        "--retrieval-only", "--llm-backend", "transformers", "--out", str(out), "--limit", "2",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "'graphrag_global'" in proc.stderr and "community_reports" in proc.stderr
    assert not (out / "runs" / "bm25").exists()
    one = run_cli("compare", str(demo_index), "demo", "--method", "bm25", "--out", str(out))
    assert one.returncode == 2 and "two or more --method" in one.stderr


def test_the_api_compares_with_the_same_call(demo_index, tmp_path) -> None:
    from graphrag_engine import Engine

    runs, report = Engine(demo_index).compare(
        ["bm25", "naive"], "demo", tmp_path / "api", ks=[2, 5], limit=4, retrieval_only=True
    )
    assert list(runs) == ["bm25", "naive"] and report.name == "report.md"
    assert "recall@5" in report.read_text()
    assert all(r.folder.parent == tmp_path / "api" / "runs" for r in runs.values())
