"""`graphrag-engine eval`: score query runs and write a report folder.

The report holds `report.md` (one table per metric, a row per run, mean with its 95%
bootstrap interval) with the cost table and the plots at the top (quality against cost per
question, Recall@k curves, bars with error bars per metric group), `summary.csv` and
`per_question.csv`. eval/compare.py compares two runs question by question.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import math
import os
import re
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from graphrag_engine.eval.costs import cost_table, judge_usage, run_cost
from graphrag_engine.eval.html import write_html
from graphrag_engine.eval.judge import pairwise_judge, win_rate_table
from graphrag_engine.eval.metrics import (
    accuracy,
    bootstrap_ci,
    entity_prf,
    exact_match,
    hit_at_1,
    hit_at_k,
    recall_at_k,
    token_f1,
)
from graphrag_engine.eval.plots import cost_quality_plot, metric_plots
from graphrag_engine.eval.ragas import ragas_scores
from graphrag_engine.eval.run_rows import ResultRun, common_runs, open_run, run_flags
from graphrag_engine.store.staging import OWNED, listed_files, staging_beside, write_listing

log = logging.getLogger(__name__)


def load_run(run: str | Path) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(label, summary, result rows) of a finished query run, every row in memory (a report
    streams them instead: `run_rows.open_run`)."""
    opened = open_run(run)
    return opened.label, opened.summary, opened.rows()


def unique_labels(runs: list[str | Path], labels: list[str]) -> list[str]:
    """Each run's label, a label that several runs share followed by its folder's parent
    ("pankrag (runs-a)"), then by its position where that is shared too."""
    out = list(labels)
    for label in set(labels):
        where = [i for i, x in enumerate(labels) if x == label]
        if len(where) > 1:
            for i in where:
                out[i] = f"{label} ({Path(runs[i]).resolve().parent.name})"
    for label in set(out):
        where = [i for i, x in enumerate(out) if x == label]
        if len(where) > 1:
            for n, i in enumerate(where, 1):
                out[i] = f"{label} #{n}"
    return out


def score_rows(
    rows: list[dict[str, Any]], ks: list[int], flags: tuple[bool, bool] | None = None
) -> dict[str, list[float]]:
    """Per-question values of every metric that the rows' gold supports (NaN where not);
    `flags` (`run_rows.run_flags`) says whether the whole run answers and ranks gold
    passages when `rows` are one batch of it."""
    nan = float("nan")
    out: dict[str, list[float]] = {}

    def put(name: str, value: float) -> None:
        out.setdefault(name, []).append(value)

    if flags is None:
        flags = (
            any(r["answer"] is not None for r in rows),
            # recall needs gold passages and a run that ranks passages (global search: none)
            any(r["supporting_ids"] for r in rows) and any(r["retrieved_ids"] for r in rows),
        )
    have_answers, have_support = flags
    for r in rows:
        gold, pred = r["gold_answers"] or [], r["answer"]
        extras = r["extras"]
        if have_answers:
            failed = r["answer_failed"] is not None  # its prompt failed: scored wrong, counted
            ok = (pred is not None or failed) and gold and r["kind"] != "abstract"
            pred_text = "" if failed else pred
            put("exact_match", exact_match(pred_text, gold) if ok else nan)
            put("f1", token_f1(pred_text, gold) if ok else nan)
            put("accuracy", accuracy(pred_text, gold) if ok else nan)
            put("answer_failed", float(failed))
        if r["kind"] == "kbqa" and pred is not None:
            put("hr@1", hit_at_1(split_answers(pred), gold))
        ents = extras.get("retrieved_entities")
        if ents is not None and gold:
            for name, v in entity_prf(ents, gold).items():
                put(f"entity_{name}", v)
        for module, names in (extras.get("module_entities") or {}).items():
            if gold and names is not None:  # None: the module did not run for this question
                for name, v in entity_prf(names, gold).items():
                    put(f"{module}_entity_{name}", v)
        for key, v in (extras.get("module_seconds") or {}).items():
            if v is not None:
                put("seconds_" + key.replace("_seconds_per_question", ""), float(v))
        if have_support:
            for k in ks:
                put(f"recall@{k}", recall_at_k(r["retrieved_ids"], r["supporting_ids"] or [], k))
            for k in ks:
                put(f"hit@{k}", hit_at_k(r["retrieved_ids"], r["supporting_ids"] or [], k))
        put("query_tokens", float(sum(r["tokens"].values())))
        put("seconds", float(sum(r["seconds"].values())))
    return out


def split_answers(text: str) -> list[str]:
    """A KBQA answer listing several entities, split on newlines, semicolons, commas or "|"."""
    parts = [p.strip(" .") for p in re.split(r"[\n;|,]", text)]
    return [p for p in parts if p]


def _spread(values: list[float]) -> str:
    """Median and 90th percentile of per-question values ("–" when there are none)."""
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return "–"
    med, p90 = np.percentile(vals, [50, 90])
    return f"median {med:.3g}, p90 {p90:.3g}"


def _fmt(mean: float, lo: float, hi: float, scale: float) -> str:
    if math.isnan(mean):
        return "–"
    if scale == 1.0:
        return f"{mean:.3g} [{lo:.3g}, {hi:.3g}]"
    return f"{mean * scale:.1f} [{lo * scale:.1f}, {hi * scale:.1f}]"


def evaluate_runs(
    runs: list[str],
    out: str | Path,
    ks: list[int],
    judge_llm=None,
    pairwise: bool = False,
    ragas: bool = False,
    judge_limit: int | None = None,
    judge_max_tokens: int = 400,
    judge_retries: int = 2,
) -> Path:
    """Score every run and write the report folder; returns the path of report.md."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    opened = [open_run(r) for r in runs]
    labels = unique_labels(runs, [r.label for r in opened])
    opened, note = common_runs(
        [dataclasses.replace(r, label=label) for r, label in zip(opened, labels, strict=True)]
    )
    if note:
        log.info(f"eval: {note}")
    scores = {r.label: score_run(r, ks) for r in opened}
    if ragas and judge_llm is not None:
        for r in opened:
            scores[r.label].update(
                ragas_scores(judge_llm, r.rows(judge_limit), judge_max_tokens, judge_retries)
            )
    metrics = sorted({m for s in scores.values() for m in s}, key=metric_order)
    table: dict[str, dict[str, tuple[float, float, float, int]]] = {}
    for label in labels:
        for m in metrics:
            vals = scores[label].get(m, [])
            n = sum(1 for v in vals if not math.isnan(v))
            table.setdefault(m, {})[label] = (*bootstrap_ci(vals), n)

    def cell(m: str, label: str) -> str:
        if m.startswith("seconds"):  # a batch's time split evenly: a distribution, not a mean
            return _spread(scores[label].get(m, []))
        mean, lo, hi, _ = table[m][label]
        return _fmt(mean, lo, hi, 1.0 if m.startswith("query_tokens") else 100.0)

    lines = ["# Evaluation report", "", "Runs: " + ", ".join(f"`{r}`" for r in runs), ""]
    if note:
        lines += [f"**{note}**", ""]
    lines.append(
        "Mean per question (%, except tokens), 95% bootstrap interval in brackets (2,000 "
        "resamples); seconds per question as median and 90th percentile."
    )
    top = [m for m in metrics if m.startswith(TOP_METRICS)] or metrics
    lines += ["", "| run | " + " | ".join(top) + " |", "|---" * (len(top) + 1) + "|"]
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(cell(m, label) for m in top) + " |")
    if len(top) < len(metrics):
        lines += ["", "Every other metric has its own table below the plots."]
    cost = {r.label: run_cost(r.summary, r.n) for r in opened}
    costs = cost_table([(r.label, r.summary, r.n) for r in opened], cost)
    lines += ["", *costs]
    plotted = metric_plots(out, labels, metrics, table, ks)
    scatter = cost_quality_plot(out, labels, table, cost)
    images = [(f"{name} (95% bootstrap CI)", f"{name}.png") for name in plotted]
    if (out / "recall_at_k.png").exists():
        images.insert(0, ("Recall@k", "recall_at_k.png"))
    if scatter:
        images.insert(0, ("quality against cost per question", scatter))
    if images:
        lines += ["", "## plots", ""] + [f"![{title}]({png})" for title, png in images]
    for m in metrics:
        unit = "" if m.startswith(("query_tokens", "seconds")) else " (%)"
        lines += ["", f"## {m}{unit}", "", "| run | value | n |", "| --- | --- | --- |"]
        for label in labels:
            lines.append(f"| {label} | {cell(m, label)} | {table[m][label][3]} |")
    if pairwise and judge_llm is not None:
        loaded = [(r.label, r.summary, r.rows()) for r in opened]
        verdicts = pairwise_judge(judge_llm, loaded, judge_limit, judge_max_tokens, judge_retries)
        write_csv(out / "judge_verdicts.csv", verdicts)
        lines += ["", *win_rate_table(verdicts)]

    write_csv(
        out / "summary.csv",
        [
            {"run": lb, "metric": m, "mean": v[0], "ci_low": v[1], "ci_high": v[2], "n": v[3]}
            for m in metrics
            for lb, v in table[m].items()
        ],
    )
    write_per_question(out / "per_question.csv", opened, scores)
    if judge_llm is not None and (pairwise or ragas):
        lines += ["", *judge_usage(out, judge_llm.ledger.summary())]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    shown = [(title, out / png) for title, png in images]
    write_html(out / "report.html", runs, top, table, costs, shown, opened, scores)
    return out / "report.md"


def score_run(run: ResultRun, ks: list[int]) -> dict[str, array]:
    """Per-question values of every metric of a run (see `score_rows`), a batch at a time."""
    flags = run_flags(run)
    out: dict[str, array] = {}
    for rows in run.batches():
        for name, values in score_rows(rows, ks, flags).items():
            out.setdefault(name, array("d")).extend(values)
    return out


def write_per_question(path: Path, runs: list[ResultRun], scores: dict[str, dict]) -> None:
    """per_question.csv: a line per run and question with its answer and every metric's value,
    each run's rows streamed in order."""
    names = list(dict.fromkeys(m for r in runs for m in scores[r.label]))
    fields = ["run", "qid", "question", "gold", "answer", *names]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for run in runs:
            values, i = scores[run.label], 0
            for rows in run.batches(["qid", "question", "gold_answers", "answer"]):
                for r in rows:
                    w.writerow(
                        {
                            "run": run.label,
                            "qid": r["qid"],
                            "question": r["question"],
                            "gold": " | ".join(r["gold_answers"] or []),
                            "answer": r["answer"],
                            **{m: v[i] for m, v in values.items() if i < len(v)},
                        }
                    )
                    i += 1


TOP_METRICS = ("exact_match", "f1", "accuracy", "hr@1", "recall@")
"""The metrics of the report's first table (answers and retrieval); the rest follow below."""


def metric_order(m: str) -> tuple[int, int, str]:
    groups = [
        "hr@1",
        "entity_",
        "se_entity_",
        "pf_entity_",
        "pr_entity_",
        "exact_match",
        "f1",
        "accuracy",
        "recall@",
        "hit@",
        "faith",
        "context_",
        "query_tokens",
        "seconds",
    ]
    for i, g in enumerate(groups):
        if m.startswith(g):
            k = int(m.split("@")[1]) if "@" in m else 0
            return i, k, m
    return len(groups), 0, m


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


REPORT_MARKER = ".graphrag-engine-report.json"
"""Lists the files the last report wrote into its folder, so the next one removes those it
does not write again (a compare table beside a newer report) and nothing else."""


def write_staged(out: Path, write: Callable[[Path], Path]) -> Path:
    """Write a report into a staging folder beside `out`, then move its files into `out`
    (renames, which need no space): a killed or failed eval leaves the report folder as it
    was, never a half-written or empty file. Returns the written file's path in `out`."""
    marker = out / REPORT_MARKER
    earlier = set(listed_files(marker) or [])  # none, or unreadable: remove nothing
    with staging_beside(out) as staging:
        written = write(staging)
        names = sorted(p.name for p in staging.iterdir() if p.name != OWNED)
        for name in names:
            os.replace(staging / name, out / name)
    for name in sorted(earlier - set(names) - {REPORT_MARKER}):
        if "/" not in name and name not in ("", ".", "..") and (out / name).is_file():
            (out / name).unlink()  # a file only the earlier report had: stale
    write_listing(marker, names)
    return out / written.name
