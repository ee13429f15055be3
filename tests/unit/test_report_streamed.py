"""A report streams its runs' rows a batch at a time: the figures, the per-question file and
the question pages are those of the rows read whole (a batch of 3 rows against one of all),
with runs over different question sets cut to the shared questions."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from graphrag_engine.eval import run_rows
from graphrag_engine.eval.metrics import bootstrap_ci
from graphrag_engine.eval.report import evaluate_runs, score_rows
from graphrag_engine.results import results_table


def _rows(qids: list[str], seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for q in qids:
        ranked = rng.sample([f"p{i}" for i in range(8)], 5)
        answer = rng.choice(["Paris", "Lyon", None])
        out.append(
            {
                "qid": q, "question": f"where is {q}?", "method": "m", "answer": answer,
                "retrieved_ids": ranked, "retrieved_chunk_ids": ranked,
                "retrieved_scores": [1.0] * 5, "context_ids": ranked[:2],
                "context_text": [f"text of {p}" for p in ranked[:2]], "gold_answers": ["Paris"],
                "supporting_ids": ["p1", "p2"], "qtype": None, "kind": "passage",
                "tokens": {"answer": rng.randint(1, 9)}, "seconds": {"retrieve": 0.01},
                "answer_failed": "timeout" if rng.random() < 0.1 else None,
                "extras": {"retrieved_entities": ["Paris"] if rng.random() < 0.5 else None},
            }
        )  # fmt: skip
    return out


def _run(folder: Path, rows: list[dict]) -> str:
    folder.mkdir(parents=True)
    pq.write_table(results_table(rows), folder / "results.parquet")
    (folder / "summary.json").write_text(json.dumps({"label": folder.name, "seconds": 2.0}))
    return str(folder)


@pytest.fixture()
def runs(tmp_path: Path) -> tuple[list[str], list[list[dict]]]:
    a = _rows([f"q{i}" for i in range(40)], 1)
    b = _rows([f"q{i}" for i in range(5, 50)], 2)  # 35 questions shared with a
    return [_run(tmp_path / "a", a), _run(tmp_path / "b", b)], [a, b]


def _report(runs: list[str], out: Path, batch: int, monkeypatch) -> dict[str, str]:
    monkeypatch.setattr(run_rows, "READ_ROWS", batch)
    evaluate_runs(runs, out, [1, 5])
    return {name: (out / name).read_text() for name in ("summary.csv", "per_question.csv")}


def test_a_report_read_in_small_batches_equals_one_read_whole(tmp_path, runs, monkeypatch):
    folders, _ = runs
    small = _report(folders, tmp_path / "small", 3, monkeypatch)
    whole = _report(folders, tmp_path / "whole", 10_000, monkeypatch)
    assert small == whole
    page = (tmp_path / "small" / "report.html").read_text()
    assert page.count("class='question' id='q-") == 35  # a page per shared question
    assert "different question sets" in (tmp_path / "small" / "report.md").read_text()


def test_the_figures_are_those_of_the_shared_rows_scored_whole(tmp_path, runs, monkeypatch):
    folders, (a, b) = runs
    _report(folders, tmp_path / "rep", 4, monkeypatch)
    shared = {r["qid"] for r in a} & {r["qid"] for r in b}
    with open(tmp_path / "rep" / "summary.csv") as fh:
        got = {(r["run"], r["metric"]): r for r in csv.DictReader(fh)}
    for label, rows in (("a", a), ("b", b)):
        reference = score_rows([r for r in rows if r["qid"] in shared], [1, 5])
        for metric in ("recall@5", "f1", "exact_match", "entity_recall", "answer_failed"):
            mean, lo, hi = bootstrap_ci(reference[metric])
            row = got[(label, metric)]
            assert math.isclose(float(row["mean"]), mean), (label, metric)
            assert math.isclose(float(row["ci_low"]), lo) and math.isclose(
                float(row["ci_high"]), hi
            )
            assert int(row["n"]) == sum(not math.isnan(v) for v in reference[metric])
    with open(tmp_path / "rep" / "per_question.csv") as fh:
        lines = list(csv.DictReader(fh))
    assert len(lines) == 2 * len(shared) and {ln["qid"] for ln in lines} == shared
