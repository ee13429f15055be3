"""ReGraphRAG on MuSiQue dev (200 questions) over the LLM-free (alpha = 0) index: the structure
Algorithm 1 makes, the retrieval proxy next to the baselines, and batched vs one-at-a-time speed.

    .venv/bin/python bench/regraphrag.py [--work DIR] [--questions 200]

Runs, from one `graphrag-engine query --retrieval-only` each (bench/retrieval.py's machinery,
the index shared with it under WORK/idx/musique): ReGraphRAG without perspective expansion
(LLM-free: the question is its only sub-query) with reorganization and reranking, then without
reorganization, then without reranking; BM25, dense, HippoRAG-style PPR and LightRAG-style
hybrid (NER keywords) beside them. Prints:

(a) structure per question: subgraphs, components after step 1 and step 2, path nodes and
    bridges added, connected components of the final node graph;
(b) Recall@2/5 [95% CI] of the chunks behind the listed triplets, in prompt order, under the
    same section budget (`context_tokens`) for every variant;
(c) questions/s batched vs one question at a time (in process, same context object, the ratio),
    and the seconds of reorganization alone per question.
The variants with perspective expansion need an LLM and are run by the judge bench.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)  # `bench/kernels.py` must not shadow the `kernels` package
sys.path.append(str(REPO / "bench"))

import retrieval  # noqa: E402  (bench/retrieval.py: index, method table, eval)

VARIANTS = {
    "rg_noexp": ("ReGraphRAG w/o P-exp (LLM-free)", "configs/methods/regraphrag.yaml")
    + ("expansion: false",),
    "rg_noexp_noreorg": ("  ... and w/o Reorg", "configs/methods/regraphrag.yaml")
    + ("expansion: false", "reorganize: false"),
    "rg_noexp_norerank": ("  ... and w/o Rerank", "configs/methods/regraphrag.yaml")
    + ("expansion: false", "rerank: false"),
}
BASELINES = ["bm25", "naive", "hipporag", "lr_hybrid"]
STRUCTURE = ["subgraphs", "after_paths", "after_bridges", "path_nodes_added", "bridges_added"]
STRUCTURE += ["node_components", "triplets"]


def structure(run: Path) -> dict[str, float]:
    """Mean of each structure figure over the run's questions."""
    rows = [json.loads(x) for x in (run / "results.jsonl").open()]
    extras = [
        json.loads(r["extras"]) if isinstance(r["extras"], str) else r["extras"] for r in rows
    ]
    return {k: round(sum(e[k] for e in extras) / len(extras), 2) for k in STRUCTURE}


def speed(index: Path, questions: int) -> dict[str, float]:
    """Batched vs one at a time, in process, for the LLM-free full variant."""
    from engine.eval.datasets import load_questions
    from engine.methods import query_config
    from engine.methods.regraphrag import regraphrag
    from engine.retrieve.context import QueryContext
    from engine.retrieve.types import StageClock
    from engine.store import open_index

    qs = load_questions(str(retrieval.DATA / "musique_dev.jsonl"), limit=questions)
    cfg = query_config("regraphrag")
    cfg.generation.enabled = False
    cfg.options.expansion = False
    ctx = QueryContext(open_index(index), cfg, Path("/tmp/graphrag-regraphrag-speed"))
    regraphrag(ctx, qs[:4], StageClock())  # warm: models, graph, vectors
    t0 = time.perf_counter()
    clock = StageClock()
    regraphrag(ctx, qs, clock)
    batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q in qs:
        regraphrag(ctx, [q], StageClock())
    single = time.perf_counter() - t0
    return {
        "questions": len(qs),
        "batched_q_per_s": round(len(qs) / batched, 2),
        "one_at_a_time_q_per_s": round(len(qs) / single, 2),
        "ratio": round(single / batched, 2),
        "reorganize_ms_per_question": round(1000 * clock.seconds["reorganize"] / len(qs), 2),
        "rerank_ms_per_question": round(1000 * clock.seconds["rerank"] / len(qs), 2),
    }


def main() -> None:
    """Index (shared), run, evaluate, time; print the three tables and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/graphrag-retrieval-bench")
    ap.add_argument("--questions", type=int, default=200)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    retrieval.METHODS.update(VARIANTS)
    methods = [*VARIANTS, *BASELINES]
    rows = retrieval.run_set("musique", work, False, methods)
    runs = work / "runs" / "musique"
    print("(a) structure, mean per question (MuSiQue dev, LLM-free index, one sub-query)")
    print(f"{'variant':<36}" + "".join(f"{k[:12]:>13}" for k in STRUCTURE))
    shapes = {}
    for v in VARIANTS:
        shapes[v] = structure(runs / v)
        print(f"{VARIANTS[v][0]:<36}" + "".join(f"{shapes[v][k]:>13}" for k in STRUCTURE))
    print("\n(b) Recall of the chunks behind the context (95% CI)")
    for r in rows:
        cells = [
            f"{r[f'R@{k}']:.3f} [{r[f'R@{k}_ci'][0]:.3f}, {r[f'R@{k}_ci'][1]:.3f}]" for k in (2, 5)
        ]
        print(f"{r['method']:<36}{cells[0]:<24}{cells[1]:<24}{r['q_per_s']:>8} q/s")
    fast = speed(work / "idx" / "musique", args.questions)
    print("\n(c) speed:", json.dumps(fast))
    print(json.dumps({"structure": shapes, "rows": rows, "speed": fast}))


if __name__ == "__main__":
    main()
