"""Clue-RAG Q-Iter throughput: the whole question set in one batch versus one question at a
time, same index, same results (checked), measured in the same run.

    .venv/bin/python -m bench.qiter [--set musique] [--work DIR] [--n 200]

Needs the alpha = 0 index that bench/retrieval.py builds in WORK/idx/SET. Models are loaded and
warmed before timing, so both sides measure retrieval only.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench.common import DATA, QUESTIONS, work_dir, write_result
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.clue_rag import clue_rag
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index


def main() -> None:
    """Time batched and one-at-a-time Q-Iter; print a table and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="musique", choices=sorted(QUESTIONS))
    ap.add_argument("--work", default=work_dir("retrieval"))
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    index = open_index(Path(args.work) / "idx" / args.set)
    questions = load_questions(DATA / QUESTIONS[args.set], limit=args.n)
    cfg = query_config("clue")
    cfg.generation.enabled = False
    ctx = QueryContext(index, cfg, Path(args.work) / "qiter-bench")
    clue_rag(ctx, questions[:2], StageClock())  # load models, vectors and the graph once

    t0 = time.perf_counter()
    batched = clue_rag(ctx, questions, StageClock())
    t_batch = time.perf_counter() - t0
    t0 = time.perf_counter()
    single = [clue_rag(ctx, [q], StageClock()) for q in questions]
    t_single = time.perf_counter() - t0
    same = all(s.ranking.row(0)[0] == batched.ranking.row(i)[0] for i, s in enumerate(single))
    n = len(questions)
    rows = [
        {
            "mode": "one question at a time",
            "seconds": round(t_single, 2),
            "q_per_s": round(n / t_single, 1),
        },
        {
            "mode": f"one batch of {n}",
            "seconds": round(t_batch, 2),
            "q_per_s": round(n / t_batch, 1),
        },
    ]
    print(f"{'mode':<26}{'seconds':>9}{'q/s':>8}")
    for r in rows:
        print(f"{r['mode']:<26}{r['seconds']:>9}{r['q_per_s']:>8}")
    print(f"batched / single: {t_single / t_batch:.1f}x; identical rankings: {same}")
    write_result(
        "qiter",
        {
            "bench": "qiter",
            "set": args.set,
            "n": n,
            "results": rows,
            "ratio": round(t_single / t_batch, 2),
            "identical": same,
        },
    )


if __name__ == "__main__":
    main()
