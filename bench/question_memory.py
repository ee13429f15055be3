"""Memory against the length of the question file: peak RSS and seconds of
`graphrag-engine query --retrieval-only` and of `graphrag-engine eval` over 10,000, 100,000
and 1,000,000 questions, each a new process as a user starts it, on one LLM-free index.

    .venv/bin/python -m bench.question_memory [--counts 10000,100000,1000000]
        [--method bm25] [--index DIR] [--work /tmp/graphrag-bench/question_memory] [--tag TAG]

The questions are the dev questions of MuSiQue, 2WikiMultiHopQA and HotpotQA (934 distinct
texts with their gold) repeated up to the count, each copy's id changed ("<id>#<k>"); the
index is MuSiQue's corpus through the default LLM-free build with alpha 0 (or `--index`).
Peak RSS is each process's own (`wait4`), so the figures of one count do not depend on the
others. The goal of issue 99 (item 5): the largest count within 2x of the smallest, for both
commands; `query_growth` and `eval_growth` are those ratios, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.common import DATA, DEV_SETS, QUESTIONS, index_in_child, offline_work, write_result
from bench.common import work_dir as default_work

MIB = 2**20


def question_file(count: int, path: Path) -> None:
    """`count` real dev questions, the pool repeated with each copy's id changed."""
    pool = [line for name in QUESTIONS.values() for line in (DATA / name).open(encoding="utf-8")]
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            record = json.loads(pool[i % len(pool)])
            record["id"] = f"{record['id']}#{i // len(pool)}"
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def measured(cmd: list[str], log: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one command run as a child process of its own, its
    messages in `log`."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": "0"}
    started = time.perf_counter()
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=err, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{' '.join(cmd)}: exit {code}: {tail}")
    return round(seconds, 1), round(usage.ru_maxrss * 1024 / MIB, 1)  # ru_maxrss is in KiB


def measure_count(index: Path, method: str, count: int, work: Path) -> dict:
    """One row: the query and the eval of `count` questions, each a fresh process and folder."""
    questions, run, report = (work / f"{kind}-{count}" for kind in ("questions", "run", "report"))
    questions = questions.with_suffix(".jsonl")
    if not questions.exists():
        question_file(count, questions)
    cli = [sys.executable, "-m", "graphrag_engine.cli"]
    shutil.rmtree(run, ignore_errors=True)
    shutil.rmtree(report, ignore_errors=True)
    query = [*cli, "query", str(index), str(questions), "--method", method, "--retrieval-only"]
    query_s, query_rss = measured([*query, "--out", str(run)], work / f"query-{count}.log")
    eval_s, eval_rss = measured(
        [*cli, "eval", str(run), "--out", str(report)], work / f"eval-{count}.log"
    )
    summary = json.loads((run / "summary.json").read_text())
    row = {
        "questions": count,
        "query_s": query_s,
        "query_peak_mib": query_rss,
        "eval_s": eval_s,
        "eval_peak_mib": eval_rss,
        "results_parquet_mib": round((run / "results.parquet").stat().st_size / MIB, 1),
        "results_jsonl_mib": round((run / "results.jsonl").stat().st_size / MIB, 1),
        "report_html_mib": round((report / "report.html").stat().st_size / MIB, 1),
        "recall@5": _recall5(report),
        "questions_in_summary": summary["questions"],
    }
    print(json.dumps(row), file=sys.stderr, flush=True)
    shutil.rmtree(run, ignore_errors=True)  # a million rows take gigabytes: keep one at a time
    return row


def _recall5(report: Path) -> float | None:
    """The run's mean Recall@5 from the report's summary.csv: a check that every question was scored."""
    for line in (report / "summary.csv").read_text().splitlines():
        parts = line.split(",")
        if parts[1:2] == ["recall@5"]:
            return round(float(parts[2]), 4)
    return None


def main() -> None:
    """Build (or reuse) the index, measure every count, write the result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="10000,100000,1000000")
    ap.add_argument("--method", default="bm25")
    ap.add_argument("--index", type=Path, help="an index to reuse (default: build MuSiQue's)")
    ap.add_argument("--work", default=default_work("question_memory"))
    ap.add_argument("--tag", default="", help="result file bench/results/question_memory-TAG")
    args = ap.parse_args()
    work = offline_work(args)
    index = args.index
    if index is None:
        index = work / "index"
        if not (index / "manifest.json").exists():
            index_in_child(DATA / DEV_SETS["musique"][0], index, "graph:\n  alpha: 0.0\n")
    counts = [int(c) for c in args.counts.split(",")]
    rows = [measure_count(index, args.method, n, work) for n in counts]
    first, last = rows[0], rows[-1]
    figures = {
        "method": args.method,
        "query_growth": round(last["query_peak_mib"] / first["query_peak_mib"], 2),
        "eval_growth": round(last["eval_peak_mib"] / first["eval_peak_mib"], 2),
        "goal": f"peak RSS at {last['questions']:,} within 2x of {first['questions']:,}",
        "rows": rows,
    }
    write_result("question_memory", figures, tag=args.tag)


if __name__ == "__main__":
    main()
