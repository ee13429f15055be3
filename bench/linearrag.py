"""LinearRAG on LLM-free indexes (alpha = 0), retrieval only: its activation threshold chosen on
the MuSiQue and HotpotQA train sets (the mean R@5 of both decides), with the same runs on a
train index whose graph leaves out every numeric entity (the engine's labels before
`graph.ner_skip_labels` followed LinearRAG's public code), then the dev sets with BM25,
dense MiniLM and HippoRAG-style PPR in the same run: R@2 / R@5 with 95% bootstrap intervals,
LinearRAG minus the best baseline (paired bootstrap interval and sign-flip p), its two ablations,
and batched against one question at a time.

    .venv/bin/python -m bench.linearrag [--sets musique] [--work DIR] [--skip-train]

Indexes live in WORK/idx/SET (dev, shared with bench/method_runs.py) and WORK/idx/SET_train.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench.common import DATA, DEV_SETS, work_dir, write_result
from bench.method_runs import batched_vs_single, config_variant
from graphrag_engine.cli import main as cli
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.eval.metrics import bootstrap_ci, paired_test, recall_at_k

TRAIN_SETS = {
    "musique": ("musique_train_corpus.jsonl", "musique_train.jsonl"),
    "hotpotqa": ("hotpotqa_train_corpus.jsonl", "hotpotqa_train.jsonl"),
}
THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.6)
"""Activation floors tried on train (the public code's 0.5 goes with another embedder)."""
NUMERIC_SKIPPED = "  ner_skip_labels: [CARDINAL, DATE, MONEY, ORDINAL, PERCENT, QUANTITY, TIME]\n"
"""The train comparison index: every numeric label left out of the graph, as before."""
BASELINES = {"bm25": "bm25", "naive": "naive", "hipporag": "hipporag"}
VARIANTS = {
    "linearrag": "configs/methods/linearrag.yaml",
    "linearrag_no_activation": "configs/methods/linearrag_no_activation.yaml",
    "linearrag_no_dense_seeds": "configs/methods/linearrag_no_dense_seeds.yaml",
}


def build_index(corpus: Path, out: Path, work: Path, graph: str = "") -> float | None:
    """The LLM-free index of `corpus` at `out` (kept when there), with `graph` settings added;
    seconds it took, or None."""
    if (out / "manifest.json").exists():
        return None
    cfg = work / f"{out.name}.yaml"
    cfg.write_text("graph:\n  alpha: 0.0\n" + graph)
    t0 = time.perf_counter()
    assert cli(["index", str(corpus), "--out", str(out), "--config", str(cfg)]) == 0
    return round(time.perf_counter() - t0, 1)


def run_recall(index: Path, questions: Path, spec: str, out: Path) -> tuple[dict, list]:
    """One retrieval-only run: its summary and each question's (R@2, R@5)."""
    args = ["query", str(index), str(questions), "--method", spec, "--retrieval-only"]
    assert cli([*args, "--label", out.name, "--out", str(out)]) == 0
    gold = {q.qid: q.supporting_ids for q in load_questions(questions)}
    per_q = []
    for line in (out / "results.jsonl").open():
        row = json.loads(line)
        ranked, want = row["retrieved_ids"], gold[row["qid"]]
        per_q.append((row["qid"], recall_at_k(ranked, want, 2), recall_at_k(ranked, want, 5)))
    per_q.sort()
    return json.loads((out / "summary.json").read_text()), per_q


def recall_row(label: str, summary: dict, per_q: list) -> dict:
    """R@2 / R@5 with 95% bootstrap intervals and questions/s."""
    row: dict = {"method": label, "questions": len(per_q)}
    for i, k in ((1, 2), (2, 5)):
        mean, lo, hi = bootstrap_ci([r[i] for r in per_q])
        row[f"R@{k}"] = round(mean, 3)
        row[f"R@{k}_ci"] = [round(lo, 3), round(hi, 3)]
    row["q_per_s"] = summary["questions_per_s"]
    return row


def choose_threshold(work: Path) -> tuple[float, list[dict]]:
    """The threshold of the best mean train R@5 over TRAIN_SETS (on the default index), and
    every train row of both indexes."""
    rows, by_t = [], {t: [] for t in THRESHOLDS}
    runs = {m: m for m in ("naive", "hipporag")}
    for t in THRESHOLDS:
        path = work / "configs" / f"linearrag_t{t}.yaml"
        runs[f"linearrag threshold {t}"] = config_variant(
            VARIANTS["linearrag"], [f"threshold: {t}"], path
        )
    for name, (corpus, questions) in TRAIN_SETS.items():
        for labels, graph in (("", ""), (" numeric skipped", NUMERIC_SKIPPED)):
            index = work / "idx" / f"{name}_train{labels.replace(' ', '_')}"
            seconds = build_index(DATA / corpus, index, work, graph)
            for label, spec in runs.items():
                out = work / "runs" / index.name / label.replace(" ", "_")
                summary, per_q = run_recall(index, DATA / questions, spec, out)
                row = {"set": f"{name} train{labels}", **recall_row(label, summary, per_q)}
                row["index_seconds"] = seconds
                rows.append(row)
                if not labels and label.startswith("linearrag threshold"):
                    by_t[float(label.split()[-1])].append(row["R@5"])
    best = max(THRESHOLDS, key=lambda t: (sum(by_t[t]) / len(by_t[t]), -abs(t - 0.5)))
    return best, rows


def dev_set(name: str, work: Path, threshold: float) -> tuple[list[dict], dict, dict]:
    """Baselines, LinearRAG and its ablations on one dev set; rows, the paired difference of
    LinearRAG against the best baseline, and batched vs one at a time."""
    corpus, questions = DEV_SETS[name]
    index = work / "idx" / name
    seconds = build_index(DATA / corpus, index, work)
    specs = dict(BASELINES)
    for variant, spec in VARIANTS.items():
        path = work / "configs" / f"{variant}.yaml"
        specs[variant] = config_variant(spec, [f"threshold: {threshold}"], path)
    rows, per = [], {}
    for label, spec in specs.items():
        summary, per_q = run_recall(index, DATA / questions, spec, work / "runs" / name / label)
        rows.append({"set": name, **recall_row(label, summary, per_q), "index_seconds": seconds})
        per[label] = per_q
    best = max(("bm25", "naive"), key=lambda m: next(r["R@5"] for r in rows if r["method"] == m))
    diff = {}
    for i, k in ((1, 2), (2, 5)):
        t = paired_test([r[i] for r in per[best]], [r[i] for r in per["linearrag"]])
        diff[f"R@{k}"] = {key: round(v, 4) for key, v in t.items()}
    diff = {"set": name, "against": best, **diff}
    return rows, diff, _speed(index, DATA / questions, specs["linearrag"], work)


def _speed(index: Path, questions: Path, spec: str, work: Path) -> dict:
    """LinearRAG's questions/s batched and one question at a time, same context."""
    from graphrag_engine.methods import load_query_config  # why: after the CLI runs
    from graphrag_engine.methods.linearrag import linearrag
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.store import open_index

    cfg = load_query_config(spec)
    cfg.generation.enabled = False
    ctx = QueryContext(open_index(index), cfg, work / "speed")
    figures, clock = batched_vs_single(linearrag, ctx, load_questions(questions, limit=100))
    return {"set": index.name, **figures, "stage_seconds": clock.seconds}


def main() -> None:
    """Choose the threshold on train, measure the dev sets, print and write one result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="musique")
    ap.add_argument("--work", default=work_dir("retrieval"))
    ap.add_argument("--skip-train", action="store_true", help="use the configured threshold (0.2)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    threshold, train = (0.2, []) if args.skip_train else choose_threshold(work)
    dev, diffs, speed = [], [], []
    for name in args.sets.split(","):
        rows, diff, fast = dev_set(name, work, threshold)
        dev += rows
        diffs.append(diff)
        speed.append(fast)
    for r in train + dev:
        print(
            f"{r['set']:<32}{r['method']:<32}R@2 {r['R@2']:.3f}  R@5 {r['R@5']:.3f} {r['R@5_ci']}"
        )
    for d in diffs:
        print(f"{d['set']}: LinearRAG - {d['against']}: R@5 {d['R@5']}")
    write_result(
        "linearrag",
        {
            "bench": "linearrag",
            "threshold": threshold,
            "train": train,
            "dev": dev,
            "linearrag_minus_best_baseline": diffs,
            "batched_vs_one_at_a_time": speed,
        },
    )


if __name__ == "__main__":
    main()
