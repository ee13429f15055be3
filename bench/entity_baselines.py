"""Batched against one question at a time for the entity-graph baselines (LightRAG-style local,
global, hybrid, mix with NER keywords; GraphRAG-style local search), retrieval only, on an
index that bench/retrieval.py builds: questions/s of each and whether the contexts agree.

    .venv/bin/python -m bench.entity_baselines [--set musique] [--n 200] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench.common import DATA, QUESTIONS, work_dir, write_result
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.graphrag_local import graphrag_local
from graphrag_engine.methods.lightrag import lightrag
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index

MODES = [("lightrag", "local"), ("lightrag", "global"), ("lightrag", "hybrid")]
MODES += [("lightrag", "mix"), ("graphrag_local", None)]


def main() -> None:
    """Time batched and one-at-a-time retrieval per mode; print a table and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="musique", choices=sorted(QUESTIONS))
    ap.add_argument("--work", default=work_dir("retrieval"))
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    index = open_index(Path(args.work) / "idx" / args.set)
    questions = load_questions(DATA / QUESTIONS[args.set], limit=args.n)
    rows = []
    for method, mode in MODES:
        cfg = query_config(method)
        cfg.generation.enabled = False
        if mode is not None:
            cfg.options.mode, cfg.options.keywords = mode, "ner"
        fn = lightrag if method == "lightrag" else graphrag_local
        ctx = QueryContext(index, cfg, Path(args.work) / "entity-bench")
        fn(ctx, questions[:2], StageClock())  # load models, vectors and the graph once
        t0 = time.perf_counter()
        batched = fn(ctx, questions, StageClock())
        t_batch = time.perf_counter() - t0
        t0 = time.perf_counter()
        single = [fn(ctx, [q], StageClock()) for q in questions]
        t_single = time.perf_counter() - t0
        same = all(s.contexts[0] == batched.contexts[i] for i, s in enumerate(single))
        n = len(questions)
        rows.append(
            {
                "method": method + (f" {mode}" if mode else ""),
                "batched_q_per_s": round(n / t_batch, 1),
                "single_q_per_s": round(n / t_single, 1),
                "ratio": round(t_single / t_batch, 2),
                "identical_contexts": same,
            }
        )
    print(f"{'method':<22}{'batched q/s':>13}{'single q/s':>12}{'ratio':>8}  identical")
    for r in rows:
        print(
            f"{r['method']:<22}{r['batched_q_per_s']:>13}{r['single_q_per_s']:>12}"
            f"{r['ratio']:>8}  {r['identical_contexts']}"
        )
    write_result(
        "entity_baselines",
        {"bench": "entity_baselines", "set": args.set, "n": len(questions), "results": rows},
    )


if __name__ == "__main__":
    main()
