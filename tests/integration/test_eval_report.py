"""`graphrag-engine eval`: report tables, CSV, plots, paired comparison, and the LLM judge on (the part that needs models, servers or real data)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from graphrag_engine.cli import main
from graphrag_engine.config import LLMConfig
from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.eval.forecast import forecast_judge
from graphrag_engine.eval.judge import CRITERIA, pairwise_judge
from graphrag_engine.eval.metrics import recall_at_k
from graphrag_engine.eval.ragas import ragas_scores
from graphrag_engine.methods import query_config
from graphrag_engine.models.cache import ResponseCache
from graphrag_engine.models.llm import LLM
from graphrag_engine.query.run import run_query
from graphrag_engine.results import read_rows
from graphrag_engine.store import open_index


@pytest.fixture(scope="module")
def two_runs(demo_index: Path, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    for m in ("bm25", "naive"):
        args = ["query", str(demo_index), "demo", "--method", m, "--retrieval-only"]
        assert main([*args, "--out", str(root / m)]) == 0
    return {"bm25": root / "bm25", "naive": root / "naive"}


def test_report_tables_csv_and_plots(two_runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert (
        main(
            ["eval", str(two_runs["bm25"]), str(two_runs["naive"]), "--out", str(out), "--k", "2,5"]
        )
        == 0
    )
    md = (out / "report.md").read_text()
    assert (
        "## recall@2 (%)" in md and "## hit@5 (%)" in md and "| bm25 |" in md and "| naive |" in md
    )
    summary = list(csv.DictReader((out / "summary.csv").open()))
    for run, path in two_runs.items():
        rows = pq.read_table(path / "results.parquet").to_pylist()
        expect = np.mean([recall_at_k(r["retrieved_ids"], r["supporting_ids"], 2) for r in rows])
        got = next(s for s in summary if s["run"] == run and s["metric"] == "recall@2")
        assert float(got["mean"]) == pytest.approx(expect)
        assert float(got["ci_low"]) <= expect <= float(got["ci_high"])
        assert int(got["n"]) == 45
    header = next(line for line in md.splitlines() if line.startswith("| run | recall@2"))
    assert "recall@5" in header and "hit@5" not in header  # answers and recall on top
    assert md.index(header) < md.index("## cost") < md.index("## plots") < md.index("## hit@5 (%)")
    cost = md.split("## cost", 1)[1].split("| bm25 |", 1)[1].splitlines()[0].split("|")
    summary_bm25 = json.loads((two_runs["bm25"] / "summary.json").read_text())
    assert float(cost[1]) == pytest.approx(summary_bm25["seconds"] / 45, rel=0.01)
    assert "![Recall@k](recall_at_k.png)" in md
    seconds_row = md.split("## seconds", 1)[1].split("| bm25 |", 1)[1].splitlines()[0]
    assert "median" in seconds_row and "p90" in seconds_row
    per_q = list(csv.DictReader((out / "per_question.csv").open()))
    assert len(per_q) == 90
    first = load_questions(questions_path())[0]
    row = next(r for r in per_q if r["run"] == "bm25" and r["qid"] == first.qid)
    assert row["question"] == first.question and row["gold"] == " | ".join(first.answers)
    for png in ("retrieval.png", "recall_at_k.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_labels_name_runs_and_eval_scores_the_common_questions(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """Two runs in folders of the same name are told apart by their --label; a 7-question run
    beside a 45-question run is scored on the 7 questions both hold, and the report says so."""
    base = ["query", str(demo_index), "demo", "--retrieval-only"]
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert main([*base, "--method", "bm25", "--out", str(a), "--label", "bm25 full"]) == 0
    assert main([*base, "--method", "naive", "--out", str(b), "--limit", "7"]) == 0
    assert json.loads((a / "summary.json").read_text())["label"] == "bm25 full"
    assert json.loads((b / "summary.json").read_text())["label"] == "naive"
    capsys.readouterr()
    assert main(["eval", str(a), str(b), "--out", str(tmp_path / "rep"), "--k", "5"]) == 0
    err = capsys.readouterr().err
    assert "different question sets" in err and "the 7 questions common" in err
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "bm25 full: 45, naive: 7 questions" in md and "| bm25 full |" in md
    per_q = list(csv.DictReader((tmp_path / "rep" / "per_question.csv").open()))
    assert len(per_q) == 14 and {r["run"] for r in per_q} == {"bm25 full", "naive"}
    # two runs under one label are told apart by their folders' parents
    c = tmp_path / "c" / "run"
    assert main([*base, "--method", "bm25", "--out", str(c), "--label", "bm25 full"]) == 0
    assert main(["eval", str(a), str(c), "--out", str(tmp_path / "rep2")]) == 0
    md = (tmp_path / "rep2" / "report.md").read_text()
    assert "| bm25 full (a) |" in md and "| bm25 full (c) |" in md
    assert main([*base, "--method", "bm25", "--out", str(tmp_path / "d"), "--label", "x/y"]) == 2


def test_compare_gives_paired_differences(two_runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    assert (
        main(
            ["eval", "--compare", str(two_runs["bm25"]), str(two_runs["naive"]), "--out", str(out)]
        )
        == 0
    )
    rows = {r["metric"]: r for r in csv.DictReader((out / "compare.csv").open())}
    a = pq.read_table(two_runs["bm25"] / "results.parquet").to_pylist()
    b = pq.read_table(two_runs["naive"] / "results.parquet").to_pylist()
    diff = np.mean(
        [
            recall_at_k(y["retrieved_ids"], y["supporting_ids"], 2)
            - recall_at_k(x["retrieved_ids"], x["supporting_ids"], 2)
            for x, y in zip(a, b, strict=True)
        ]
    )
    assert float(rows["recall@2"]["mean_diff"]) == pytest.approx(diff)
    assert 0 < float(rows["recall@2"]["p_value"]) <= 1
    assert "naive vs bm25" in (out / "compare.md").read_text()
    assert main(["eval", "--compare", str(two_runs["bm25"]), "--out", str(out)]) == 2


@pytest.mark.slow
def test_answers_judge_and_ragas_with_smollm(
    demo_index: Path, tmp_path: Path, smollm, capsys
) -> None:
    """Answers, the pairwise judge and RAGAS-style metrics on the real small model."""
    questions = load_questions(questions_path(), limit=4)
    index = open_index(demo_index)
    runs = []
    for method in ("bm25", "none"):
        cfg = query_config(method)
        cfg.models.llm.backend = "transformers"
        cfg.retrieval.top_k = 2
        cfg.generation.max_tokens = 12
        out = tmp_path / method
        summary = run_query(index, questions, cfg, out, "demo", llm_backend=smollm)
        assert summary["questions"] == 4
        assert summary["query_tokens_per_question"]["answer_prompt"] > 0
        runs.append(out)
    rows = read_rows(runs[0] / "results.parquet")
    assert all(isinstance(r["answer"], str) for r in rows)
    assert all(len(r["context_text"]) == 2 for r in rows)
    from graphrag_engine.eval.report import load_run

    loaded = [load_run(r) for r in runs]
    # the dry run's forecast: 2 questions x 2 orders, counted with the model's tokenizer
    cfg, cache_path = LLMConfig(backend="transformers"), tmp_path / "judge.sqlite"
    ahead = forecast_judge(loaded, cfg, cache_path, True, False, 2, 160, smollm, retries=1)
    assert [(r.stage, r.prompts, r.completion_tokens) for r in ahead] == [
        ("judge_pairwise", 4, 4 * 160)  # no earlier answers: max_tokens bounds completions
    ]
    assert ahead[0].prompt_tokens > 4 * 50 and not cache_path.exists()  # nothing written
    llm = LLM(smollm, cache=ResponseCache(cache_path))
    verdicts = pairwise_judge(llm, loaded, limit=2, max_tokens=160, retries=1)
    spent = llm.ledger.get("judge_pairwise", smollm.model_id)
    assert spent.calls >= 4 and spent.prompt_tokens >= ahead[0].prompt_tokens  # + re-asks
    again = forecast_judge(loaded, cfg, cache_path, True, False, 2, 160, smollm, retries=1)[0]
    assert again.prompts == 0 and "4 answers already in the judge cache" in again.basis
    assert len(verdicts) == 2 * 2 * len(CRITERIA)  # questions x orders x criteria
    assert {v["verdict"] for v in verdicts} <= {"a", "b", "tie", "unparsable"}
    usage = llm.ledger.summary()
    assert any(k.startswith("judge_pairwise/") for k in usage)
    scores = ragas_scores(llm, rows[:2], max_tokens=160, retries=1)
    for name in ("faithfulness", "context_recall", "context_precision"):
        assert len(scores[name]) == 2
        assert all(np.isnan(x) or 0.0 <= x <= 1.0 for x in scores[name])
    # the whole report with answer metrics, judge and RAGAS through the CLI path
    from graphrag_engine.eval.report import evaluate_runs

    md = evaluate_runs(
        [str(r) for r in runs],
        tmp_path / "rep",
        [1, 2],
        judge_llm=llm,
        pairwise=True,
        ragas=True,
        judge_limit=2,
        judge_max_tokens=160,
        judge_retries=1,
    ).read_text()
    assert "## exact_match (%)" in md and "## f1 (%)" in md and "## accuracy (%)" in md
    assert "pairwise win rates" in md and "## faithfulness (%)" in md
    assert "## judge LLM usage" in md and "| judge_pairwise/" in md
    used = json.loads((tmp_path / "rep" / "judge_usage.json").read_text())
    assert {k.split("/")[0] for k in used} >= {"judge_pairwise", "ragas_statements"}
    calls_before = llm.ledger.total().calls
    assert llm.ledger.total().cached_calls > 0  # the report re-used the verdicts above
    evaluate_runs(
        [str(r) for r in runs],
        tmp_path / "rep2",
        [1],
        judge_llm=llm,
        pairwise=True,
        ragas=True,
        judge_limit=2,
        judge_max_tokens=160,
        judge_retries=1,
    )
    assert llm.ledger.total().calls == calls_before  # every verdict came from the cache
    # RAGAS forecast once its answers are cached: faithfulness follows the cached statements
    ragas = forecast_judge(loaded[:1], cfg, cache_path, False, True, 2, 160, smollm, retries=1)
    assert {r.stage for r in ragas} >= {"ragas_statements", "ragas_context_recall"}
    assert all(r.prompts == 0 for r in ragas if r.stage != "ragas_faithfulness")
    # the CLI: `eval --judge --dry-run` against a server that is never called
    dry = tmp_path / "dry"
    args = ["eval", *map(str, runs), "--out", str(dry), "--judge", "--dry-run"]
    args += ["--judge-limit", "2", "--judge-backend", "openai", "--judge-model", "smollm2"]
    assert main([*args, "--base-url", "http://127.0.0.1:9/v1"]) == 0
    printed = capsys.readouterr().out
    assert "judge_pairwise: 4 prompts" in printed and "nothing was sent or written" in printed
    assert not dry.exists()
    per_q = list(csv.DictReader((tmp_path / "rep" / "per_question.csv").open()))
    assert len(per_q) == 8
    assert json.loads(json.dumps(per_q[0]))["qid"] == "demo-q01"


def test_a_killed_judge_leaves_no_staging_behind(demo_index: Path, tmp_path: Path) -> None:
    """`eval --judge` SIGKILLed while its judge (the FAULT INJECTOR, hanging) is asked: its
    staging folder stays, since a killed process runs no cleanup; the next eval into the same
    folder removes it (its process is gone) and writes the report."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.fault_server import FaultInjector

    runs = [tmp_path / "bm25", tmp_path / "naive"]
    out = tmp_path / "rep"
    with FaultInjector([]) as fault:  # answers first ("ok"), then a judge that hangs
        base = ["query", str(demo_index), "demo", "--limit", "2", "--llm-backend", "openai"]
        base += ["--llm-model", "fault", "--base-url", fault.url]
        for run in runs:
            assert main([*base, "--method", run.name, "--out", str(run)]) == 0
        fault.plan = ["hang:60"] * 20
        sent = len(fault.requests)
        cmd = [sys.executable, "-m", "graphrag_engine.cli", "eval", *map(str, runs), "--judge"]
        cmd += ["--judge-backend", "openai", "--judge-model", "fault", "--base-url", fault.url]
        env = {**os.environ, "GRAPHRAG_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
        proc = subprocess.Popen([*cmd, "--out", str(out)], env=env, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while len(fault.requests) == sent and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert len(fault.requests) > sent, "the judge never asked"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    staged = list(tmp_path.glob(".rep.staging-*"))
    assert len(staged) == 1 and not (out / "report.md").exists()
    assert main(["eval", *map(str, runs), "--out", str(out)]) == 0
    assert not list(tmp_path.glob(".rep.staging-*")) and (out / "report.md").exists()
