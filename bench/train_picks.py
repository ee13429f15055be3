"""Settings picked on the train sets, each pick re-run from here at the current code, so that
every pick the docs name has the result of the run that made it.

    .venv/bin/python -m bench.train_picks chunk [--sets musique,hotpotqa] [--work DIR] [--reuse]
    .venv/bin/python -m bench.train_picks graph [--sets musique,hotpotqa] [--work DIR] [--reuse]
    .venv/bin/python -m bench.train_picks lego_eps [--scales 0.125,2] [--eps 1e-5,1e-6,1e-7,1e-8]
                                                   [--reference 1e-9] [--work DIR] [--reuse]

`chunk`: the order of the chunks behind retrieved entities and relations (LightRAG-style hybrid
and mix with NER keys, ROGRAG's dual level, GraphRAG-style local search, whose text units
PankRAG's specific steps share), by cosine to the question (LightRAG's VECTOR pick) or in the
order they were found. `graph`: how HippoRAG's seeds reach the graph (NER mentions linked to
entities, the ends of the relations nearest the question as in HippoRAG 2, or both; how many
relations) and ReGraphRAG without expansion (the relations among its nodes or touching them,
either edge text, chunks by cosine or triplet by triplet). Both index each train corpus
(MuSiQue, HotpotQA) once with today's defaults (`--reuse`: the index this bench built in WORK)
and give every run's R@2 / R@5 with 95% bootstrap intervals and questions/s, BM25 and dense
beside them.

`lego_eps`: LEGO-GraphRAG's PPR tolerance. Each corpus is bench/scale.py's at that scale (real
passages up to s times MuSiQue's characters, MuSiQue train's among them past 1x), indexed
LLM-free. LEGO on the index's entity graph (`lego_index` of bench/llm_free.py) ranks every
MuSiQue train question once per tolerance; its top-k passages (`--k`, 20) are held against the
reference tolerance's, with the forward push's own count of pushes (the most any question of a
batch took, summed over batches). The pick: the largest tolerance whose top-k equals the
reference's for every question on every corpus.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.common import DATA, index_in_child, offline_work, work_dir, write_result
from bench.descriptions import build_or_reuse, recall_rows
from bench.linearrag import TRAIN_SETS
from bench.llm_free import METHODS, agreement, method_config, time_method
from bench.scale import POOL, passages, write_corpus
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.kernels import ppr
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.store import open_index

DUAL_LEVEL = METHODS["rograg_dual_level_ner"][1]
CHUNK_RUNS = {
    "bm25": METHODS["bm25"],
    "naive": METHODS["naive"],
    **{
        f"lightrag_{mode}_ner_{pick}": (
            "lightrag",
            {"keywords": "ner", "mode": mode, "chunk_pick": pick},
        )
        for mode in ("hybrid", "mix")
        for pick in ("vector", "weight")
    },
    "rograg_dual_level_ner_vector": ("rograg", {**DUAL_LEVEL, "chunk_pick": "vector"}),
    "rograg_dual_level_ner_found": ("rograg", {**DUAL_LEVEL, "chunk_pick": "found"}),
    "graphrag_local_vector": ("graphrag_local", {"text_unit_order": "vector"}),
    "graphrag_local_graphrag": ("graphrag_local", {"text_unit_order": "graphrag"}),
}
"""`chunk`'s runs: name -> (registered method, its settings)."""


def no_expansion(edges: str, edge_text: str, chunk_order: str) -> tuple[str, dict]:
    """ReGraphRAG without expansion, with these subgraph edges, edge text and chunk order."""
    settings = {"edges": edges, "edge_text": edge_text, "chunk_order": chunk_order}
    return "regraphrag", {"expansion": False, **settings}


GRAPH_RUNS = {
    "bm25": METHODS["bm25"],
    "naive": METHODS["naive"],
    "hipporag_link_entities": ("hipporag", {"link": "entities"}),
    "hipporag_link_facts_3": ("hipporag", {"link": "facts", "fact_top_k": 3}),
    **{
        f"hipporag_link_both_{k}": ("hipporag", {"link": "both", "fact_top_k": k})
        for k in (1, 2, 3, 5)
    },
    "regraphrag_no_expansion_among_relation": no_expansion("among", "relation", "prompt"),
    "regraphrag_no_expansion_incident_relation": no_expansion("incident", "relation", "vector"),
    "regraphrag_no_expansion_incident_relation_prompt_order": no_expansion(
        "incident", "relation", "prompt"
    ),
    "regraphrag_no_expansion_incident_with_ends": no_expansion("incident", "with_ends", "prompt"),
}
"""`graph`'s runs: name -> (registered method, its settings)."""


def pick_runs(runs: dict[str, tuple[str, dict]], args: argparse.Namespace) -> dict:
    """Every run's recall rows on each train index (built with today's defaults, or reused)."""
    work = offline_work(args)
    recall = []
    for name in args.sets.split(","):
        corpus, questions = TRAIN_SETS[name]
        index, _ = build_or_reuse(f"{name}_train", DATA / corpus, "sentences", work, args.reuse)
        for row in recall_rows(index, DATA / questions, work, runs=runs):
            recall.append({"set": f"{name} train", **row})
            print(f"{name:<10}{row['method']:<56}R@5 {row['R@5']:.3f} {row['R@5_ci']}", flush=True)
    return {"recall": recall}


class PushCounter:
    """Sums the pushes the forward push reports while it is installed (one kernel call a
    batch; each call reports the most pushes any of its questions took)."""

    def __init__(self) -> None:
        self.pushes = 0
        self._push = ppr._local

    def __enter__(self) -> PushCounter:
        def counted(*args, **kwargs):
            out = self._push(*args, **kwargs)
            self.pushes += int(out.iterations)
            return out

        ppr._local = counted
        return self

    def __exit__(self, *exc: object) -> None:
        ppr._local = self._push


def scale_index(scale: float, work: Path, reuse: bool) -> tuple[Path, dict]:
    """The LLM-free index of bench/scale.py's corpus at `scale`, and the corpus's counts."""
    name = f"x{scale:g}"
    corpus = work / f"{name}.jsonl"
    with open(DATA / POOL[0], encoding="utf-8") as f:
        unit = sum(len(json.loads(line)["text"]) for line in f)
    counts = write_corpus(passages(), int(scale * unit), corpus)
    out = work / name
    if not (reuse and (out / "manifest.json").exists()):
        run = index_in_child(corpus, out, "graph:\n  alpha: 0.0\n")
        counts["index_seconds"] = round(run["seconds"], 1)
    return out, counts


def lego_rankings(index_dir: Path, eps: float, k: int, questions: list, work: Path) -> dict:
    """LEGO on the index graph at tolerance `eps`: every question's top-k, seconds, pushes."""
    cfg = method_config("lego_index", "cpu")
    cfg.options.se.eps = eps
    cfg.retrieval.top_k = cfg.retrieval.candidates = k
    ctx = QueryContext(open_index(index_dir), cfg, work / f"run-{eps:g}")
    with PushCounter() as counter:
        timing = time_method(ctx, questions)
    return {
        "rankings": timing.rankings,
        "seconds": round(timing.seconds, 2),
        "pushes": counter.pushes,
    }


def lego_eps(args: argparse.Namespace) -> dict:
    """Rank at every tolerance on each corpus, compare with the reference, pick."""
    work = offline_work(args)
    questions = load_questions(DATA / args.questions)
    tolerances = [float(e) for e in args.eps.split(",")]
    corpora, equal_everywhere = [], {e: True for e in tolerances}
    for scale in (float(s) for s in args.scales.split(",")):
        index_dir, counts = scale_index(scale, work, args.reuse)
        ref = lego_rankings(index_dir, args.reference, args.k, questions, work / index_dir.name)
        rows = []
        for eps in tolerances:
            got = lego_rankings(index_dir, eps, args.k, questions, work / index_dir.name)
            same = agreement(got["rankings"], ref["rankings"], args.k)
            equal_everywhere[eps] &= same[f"top{args.k}_identical"] == 1.0
            rows.append(
                {
                    "eps": eps,
                    **same,
                    "seconds": got["seconds"],
                    "pushes": got["pushes"],
                    "pushes_of_reference": round(got["pushes"] / max(1, ref["pushes"]), 3),
                }
            )
        reference = {k: ref[k] for k in ("seconds", "pushes")}
        corpora.append({"scale": scale, **counts, "reference": reference, "tolerances": rows})
    kept = [e for e in tolerances if equal_everywhere[e]]
    return {
        "questions": len(questions),
        "question_file": args.questions,
        "k": args.k,
        "reference_eps": args.reference,
        "corpora": corpora,
        "pick": max(kept) if kept else None,
        "rule": "largest eps whose top-k equals the reference's for every question on every corpus",
    }


def main(argv: list[str] | None = None) -> None:
    """Run one pick and write its result (bench/results/train_picks-<pick>.json)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    picks = ap.add_subparsers(dest="pick", required=True)
    for name in ("chunk", "graph"):
        p = picks.add_parser(name)
        p.add_argument("--sets", default="musique,hotpotqa")
        p.add_argument("--work", default=work_dir("train_picks"))
        p.add_argument("--reuse", action="store_true")
    p = picks.add_parser("lego_eps")
    p.add_argument("--scales", default="0.125,2")
    p.add_argument("--eps", default="1e-5,1e-6,1e-7,1e-8")
    p.add_argument("--reference", type=float, default=1e-9)
    p.add_argument("--k", type=int, default=20)
    p.add_argument("--questions", default="musique_train.jsonl")
    p.add_argument("--work", default=work_dir("lego_eps"))
    p.add_argument("--reuse", action="store_true", help="query indexes built in WORK before")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.pick == "lego_eps":
        figures = lego_eps(args)
    else:
        figures = pick_runs(CHUNK_RUNS if args.pick == "chunk" else GRAPH_RUNS, args)
    write_result("train_picks", figures, tag=args.pick)


if __name__ == "__main__":
    main()
