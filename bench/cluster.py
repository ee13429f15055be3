"""Cluster jobs measured on this machine (issue 21 item 6): index of MuSiQue with the Ray
executor on a private 2-worker cluster vs local; a scheduled re-index after 10% new, 5 changed
and 5 deleted documents vs a full rebuild of the new corpus; a query job of 1,000 questions on 2
Ray workers vs 1. Prints a table and a JSON line.

    .venv/bin/python -m bench.cluster [--work DIR] [--questions 1000]
                                      [--method hipporag] [--batch-size 50]
                                      [--skip index,reindex,query]

Every build is a fresh `graphrag-engine` process (LLM-free index, alpha 0). The re-index starts
from a copy of the local MuSiQue index (its caches included, as a scheduled job finds them); its
new documents are real passages of MuSiQue's train corpus, its changed ones get a sentence
appended. The query job runs retrieval only; its 1,000 questions are the dev questions of
MuSiQue, HotpotQA, 2WikiMultiHopQA and MultiHop-RAG in that order, all against the MuSiQue
index (a throughput measurement: most of their gold passages are not in it).
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

from bench.common import DATA, REPO, read_jsonl, work_dir, write_result
from graphrag_engine.store import open_index
from graphrag_engine.store.compare import index_differences

QUESTION_FILES = ["musique_dev", "hotpotqa_dev", "2wikimultihopqa_dev", "multihoprag_dev"]


def cli(*args: str) -> tuple[float, str]:
    """Run `graphrag-engine ARGS` in a fresh process; (seconds, stdout)."""
    env = {
        **os.environ,
        "GRAPHRAG_PROGRESS": "0",
        "HF_HUB_OFFLINE": "1",
        "RAY_AUTH_MODE": "disabled",
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "graphrag_engine.cli", *args], env=env, cwd=REPO, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"graphrag-engine {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, done.stdout


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def bench_index(work: Path) -> dict:
    """MuSiQue's corpus indexed by the local executor and by Ray on 2 workers."""
    corpus = DATA / "musique_corpus.jsonl"
    local, ray = work / "index-local", work / "index-ray"
    for out in (local, ray):
        shutil.rmtree(out, ignore_errors=True)
    s_local, _ = cli("index", str(corpus), "--out", str(local))
    s_ray, _ = cli("index", str(corpus), "--out", str(ray), "--executor", "ray")
    diff = index_differences(open_index(local), open_index(ray))
    return {
        "documents": open_index(local).rows("documents"),
        "local_s": round(s_local, 1),
        "ray_2_workers_s": round(s_ray, 1),
        "ray_over_local": round(s_ray / s_local, 2),
        "same_index": not diff,
        "differences": diff,
    }


def bench_reindex(work: Path) -> dict:
    """A copy of the local index re-indexed after a day of edits, vs a full rebuild."""
    base = read_jsonl(DATA / "musique_corpus.jsonl")
    added = read_jsonl(DATA / "musique_train_corpus.jsonl")[: len(base) // 10]
    changed = [{**r, "text": r["text"] + " This passage was revised."} for r in base[5:10]]
    src = work / "source"
    shutil.rmtree(src, ignore_errors=True)
    write_jsonl(src / "passages.jsonl", changed + base[10:] + added)
    index = work / "index-reindexed"
    shutil.rmtree(index, ignore_errors=True)
    shutil.copytree(work / "index-local", index)
    s_re, out = cli("reindex", str(src), "--out", str(index))
    s_noop, noop = cli("reindex", str(src), "--out", str(index))
    full = work / "index-full"
    shutil.rmtree(full, ignore_errors=True)
    s_full, _ = cli("index", str(src), "--out", str(full))
    a, b = open_index(index), open_index(full)
    stages, stages_full = a.manifest["stats"]["stages"], b.manifest["stats"]["stages"]
    diff = index_differences(a, b)

    def work_done(st: dict) -> dict:
        return {
            "chunks_embedded": st["embed_chunks"]["embedded"],
            "units_tagged": st["ner"]["tagged"],
            "vectors_embedded": st["embed"]["embedded"],
        }

    return {
        "edits": {"new": len(added), "changed": 5, "deleted": 5},
        "line": out.strip().splitlines()[-1],
        "reindex_s": round(s_re, 1),
        "unchanged_rerun_s": round(s_noop, 1),
        "unchanged_rerun": noop.strip().splitlines()[-1],
        "full_rebuild_s": round(s_full, 1),
        "full_over_reindex": round(s_full / s_re, 2),
        "reindex_work": work_done(stages),
        "full_rebuild_work": work_done(stages_full),
        "same_index_as_full_rebuild": not diff,
        "differences": diff,
    }


def bench_query(work: Path, n: int, method: str, batch_size: int) -> dict:
    """A retrieval-only query job of n questions on 1 and on 2 Ray workers."""
    records: list[dict] = []
    for name in QUESTION_FILES:
        records.extend(read_jsonl(DATA / f"{name}.jsonl"))
    questions = write_jsonl(work / "questions.jsonl", records[:n])
    out = {}
    for workers in (1, 2):
        run = work / f"query-{workers}"
        shutil.rmtree(run, ignore_errors=True)
        seconds, _ = cli(
            "query", str(work / "index-local"), str(questions), "--method", method, "--out",
            str(run), "--retrieval-only", "--executor", "ray", "--workers", str(workers),
            "--batch-size", str(batch_size),
        )  # fmt: skip
        summary = json.loads((run / "summary.json").read_text())
        out[f"{workers}_workers"] = {
            "wall_s": round(seconds, 1),
            "run_s": summary["seconds"],
            "questions_per_s": summary["questions_per_s"],
        }
    out["questions"] = n
    out["method"] = method
    out["batch_size"] = batch_size
    out["speedup_2_over_1_run"] = round(out["1_workers"]["run_s"] / out["2_workers"]["run_s"], 2)
    out["speedup_2_over_1_wall"] = round(out["1_workers"]["wall_s"] / out["2_workers"]["wall_s"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=work_dir("cluster"))
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--method", default="hipporag")
    ap.add_argument("--batch-size", type=int, default=50, help="questions per query batch")
    ap.add_argument("--skip", default="", help="comma list of sections to skip")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    load = os.getloadavg()
    result: dict = {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load]}
    if "index" not in skip:
        result["index"] = bench_index(work)
        print("index:", json.dumps(result["index"]), flush=True)
    if "reindex" not in skip:
        result["reindex"] = bench_reindex(work)
        print("reindex:", json.dumps(result["reindex"]), flush=True)
    if "query" not in skip:
        result["query"] = bench_query(work, args.questions, args.method, args.batch_size)
        print("query:", json.dumps(result["query"]), flush=True)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    write_result("cluster", result)


if __name__ == "__main__":
    main()
