"""Retrieval-only methods batched versus one question at a time: questions/s and the ratio,
measured in the same run, models loaded and warmed before timing, results checked equal.

    .venv/bin/python -m bench.batching [--work /work/runs/retrieval] [--n 1000]
                                       [--methods bm25,naive,hipporag,clue,lego0]

bm25, naive (dense), hipporag (PPR) and clue (Q-Iter) run on the alpha = 0 MuSiQue index that
bench/retrieval.py builds in WORK/idx/musique, over MuSiQue's 200 dev questions repeated with
new ids up to --n (the dev set has 200; retrieval keeps no cache between questions, so a repeat
costs what the first did). lego0 is LEGO-GraphRAG instance 0 (configs/lego/) over the first
--n WebQSP dev questions, each on its own graph. "Batched" is each method's configured batch
size; "one at a time" is a batch of one. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from bench.common import DATA, REPO, work_dir, write_result
from graphrag_engine.eval.datasets import Question, load_questions
from graphrag_engine.methods import load_query_config, method_spec, query_config
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import Retrieved, StageClock
from graphrag_engine.store import open_index
from graphrag_engine.store.index_store import NoIndex


def repeated(questions: list[Question], n: int) -> list[Question]:
    """The questions cycled up to n, each copy with its own id."""
    out = []
    for i in range(n):
        q = questions[i % len(questions)]
        out.append(dataclasses.replace(q, qid=f"{q.qid}#{i // len(questions)}"))
    return out


def signatures(r: Retrieved, n: int) -> list[tuple]:
    """What a question's retrieval returned: its ranked chunk ids, else its context texts."""
    if r.ranking is not None:
        return [tuple(r.ranking.row(q)[0]) for q in range(n)]
    return [tuple(c.texts()) if c is not None else () for c in r.contexts]


def measure(name: str, cfg, index, questions: list[Question], work: Path) -> dict:
    """Time one method batched and one question at a time on the same questions."""
    cfg.generation.enabled = False
    ctx = QueryContext(index, cfg, work / "batching" / name)
    retrieve = method_spec(cfg.method).retrieve
    retrieve(ctx, questions[:2], StageClock())  # load models, vectors and graphs once
    bs = cfg.batch_size
    t0 = time.perf_counter()
    batched = []
    for lo in range(0, len(questions), bs):
        part = questions[lo : lo + bs]
        batched += signatures(retrieve(ctx, part, StageClock()), len(part))
    t_batch = time.perf_counter() - t0
    t0 = time.perf_counter()
    single = [signatures(retrieve(ctx, [q], StageClock()), 1)[0] for q in questions]
    t_single = time.perf_counter() - t0
    n = len(questions)
    return {
        "method": name,
        "questions": n,
        "batch_size": bs,
        "batched_qps": round(n / t_batch, 2),
        "single_qps": round(n / t_single, 2),
        "ratio": round(t_single / t_batch, 2),
        "same_results": sum(a == b for a, b in zip(batched, single, strict=True)),
    }


def main() -> None:
    """Run every method both ways; print a table and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=work_dir("retrieval"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--methods", default="bm25,naive,hipporag,clue,lego0")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    names = args.methods.split(",")
    rows = []
    multihop = [m for m in names if m != "lego0"]
    if multihop:
        index = open_index(work / "idx" / "musique")
        dev = load_questions(DATA / "musique_dev.jsonl")
        questions = repeated(dev, args.n)
        for name in multihop:
            rows.append(measure(name, query_config(name), index, questions, work))
            print(json.dumps(rows[-1]), file=sys.stderr)
    if "lego0" in names:
        cfg = load_query_config(REPO / "configs" / "lego" / "instance_00.yaml")
        questions = load_questions(DATA / "webqsp_dev.jsonl", limit=args.n)
        rows.append(measure("lego0", cfg, NoIndex(), questions, work))
    print(f"{'method':<10}{'batch':>7}{'batched q/s':>13}{'one at a time':>15}{'ratio':>8}  same")
    for r in rows:
        print(
            f"{r['method']:<10}{r['batch_size']:>7}{r['batched_qps']:>13}{r['single_qps']:>15}"
            f"{r['ratio']:>8}  {r['same_results']}/{r['questions']}"
        )
    write_result("batching", {"n": args.n, "rows": rows})


if __name__ == "__main__":
    main()
