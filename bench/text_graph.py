"""The LLM-free text graph on the dev sets: each corpus indexed as before (no descriptions, no
synonym edges) and with today's defaults, fresh, in the same run (build seconds, bytes on disk,
peak memory per document); then BM25, dense and every LLM-free entity-graph method on both
indexes, R@2 / R@5 with 95% bootstrap intervals, each method's R@5 as a share of dense's, and
the best graph method minus the best baseline (paired bootstrap interval of the difference).

    .venv/bin/python -m bench.text_graph [--sets musique,2wiki,hotpotqa] [--work DIR]
        [--configs before,sentences] [--tag TAG] [--runs NAMES] [--train] [--paired A,B]
        [--embedder all-mpnet-base-v2] [--trees]

`--configs sentences` builds and queries today's default index only (no build-time ratio); its
shares of dense and its best-graph-minus-baseline figures are still from one run. Adding
`text_entities` also queries the default index with every entity's "name: sentences" embedded
as one text (`graph.entity_vectors: text`, as before entity vectors were pooled), and writes
each run's R@2 / R@5 on the default index minus those on that one (`entity_vector_changes`). `--against
TAG` adds each default-index row's R@2 / R@5 minus those of the same set and method in the
committed result `text_graph-TAG.json` (an earlier commit's run), e.g. before a change to the
index. `--reuse`
queries an index this bench already built in WORK instead of building it again (its build
figures are then left out). `--runs` queries BM25, dense and the named runs only (this
bench's or bench/llm_free.py's names); `--train` uses the train sets (MuSiQue and HotpotQA) to
pick a setting before its dev run; `--paired A,B` adds B's R@5 minus A's per set (paired
bootstrap interval and sign-flip p). `--trees` builds the default index with RAPTOR's and
SiReRAG's trees (extractive summaries; its build figures include the tree stage) and makes
their runs available to `--runs` (TREE_RUNS): the tree methods' LLM-free variants beside the
baselines, e.g. `--configs sentences --trees --runs hipporag,clue,raptor,raptor_traversal,sirerag
--tag trees`. `--lazy` also builds each set's LazyGraphRAG index
(configs/index-lazygraphrag.yaml: concept noun phrases, communities, no reports; its build
seconds over the default index's and over its chunking plus chunk vectors, naive RAG's whole
index) and runs LazyGraphRAG on it, LLM-free (the similarity assessor at LAZY_THRESHOLD,
sentences as claims, the question as its only subquery) at the post's Z100 and Z500 budgets,
with relevance tests, communities and depth per question; on the first set, Z100 batched
against one question at a time (identical rankings, the speed-up). With `--train` it runs Z100
at each of LAZY_THRESHOLDS instead and writes the pick (best mean R@5 over the train sets).

ReGraphRAG reranking by edge texts with both ends' descriptions runs on the train sets only
(bench/descriptions.py; docs/benchmarks/train_picks.md): it embeds every candidate edge for every
question, about 0.3 questions/s here, hours on the dev sets.

Every setting was chosen on the train sets (bench/descriptions.py, bench/linearrag.py, and the
retired chunk_pick and graph_pick: docs/benchmarks/).
"""

from __future__ import annotations

import argparse
import json

from bench.common import DATA, DEV_SETS, REPO, RESULTS, offline_work, work_dir, write_result
from bench.descriptions import BUILDS, RUNS, build_or_reuse, recall_rows
from bench.linearrag import TRAIN_SETS
from bench.llm_free import METHODS, batched_vs_single
from graphrag_engine.eval.metrics import paired_test
from graphrag_engine.models.embed import DEFAULT_EMBEDDER

BASELINES = ("bm25", "naive")
RUNS_HERE = {k: v for k, v in RUNS.items() if k != "regraphrag_no_expansion_with_ends"}
"""Every train-set run but the edge-text ReGraphRAG (see the module docstring)."""
CONFIGS = ("before", "sentences", "text_entities")
TREES = "tree:\n  enabled: true\n  relatedness: true\nskeleton:\n  enabled: true\n"
"""What `--trees` adds to the default index: both trees (extractive summaries) and KET-RAG's
skeleton and keyword index."""
TREE_RUNS = {
    "raptor": ("raptor", {}),
    "raptor_traversal": ("raptor", {"retrieval": "traversal"}),
    "sirerag": ("sirerag", {}),
    "ketrag": ("ketrag", {}),
}
"""The LLM-free runs of the methods that read those parts (`--trees`), with the authors'
code's settings."""
LAZY_INDEX = (REPO / "configs/index-lazygraphrag.yaml").read_text()
"""The index `--lazy` builds beside the default: LazyGraphRAG's, as its users build it."""
LAZY_THRESHOLD = 0.7
"""The similarity assessor's sentence cosine on the dev sets (picked on train: `--train
--lazy`, bench/results/text_graph-lazy-train.json)."""
LAZY_THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
"""The thresholds `--train --lazy` compares at Z100."""
LAZY_MEANS = ("tests", "communities", "depth", "relevant_chunks", "claims")
"""What a LazyGraphRAG run records per question, averaged in its row."""


def lazy_runs(train: bool) -> dict[str, tuple[str, dict]]:
    """LazyGraphRAG's LLM-free runs: Z100 at each threshold to pick on train, else Z100 and
    Z500 at the pick."""
    free = {"refine": "none", "assessor": "similarity", "claims": "sentences"}
    if train:
        return {
            f"lazygraphrag_t{t}": ("lazygraphrag", {**free, "budget": 100, "threshold": t})
            for t in LAZY_THRESHOLDS
        }
    return {
        f"lazygraphrag_z{b}": ("lazygraphrag", {**free, "budget": b, "threshold": LAZY_THRESHOLD})
        for b in (100, 500)
    }


def lazy_figures(recall: list[dict], train: bool) -> dict:
    """On train, the threshold whose Z100 run has the best mean R@5 over the sets (the lower
    one on a tie); on dev, the threshold the runs used."""
    if not train:
        return {"lazy_threshold": LAZY_THRESHOLD}
    means = {}
    for t in LAZY_THRESHOLDS:
        r5 = [r["R@5"] for r in recall if r["method"] == f"lazygraphrag_t{t}"]
        means[t] = round(sum(r5) / len(r5), 4)
    return {"lazy_mean_R@5": means, "lazy_pick": max(means, key=lambda t: (means[t], -t))}


def index_costs(figures: dict[str, dict]) -> dict:
    """The LazyGraphRAG index's build seconds and bytes over the default index's, and its
    seconds over naive RAG's index (the default build's chunking and chunk-vector stages)."""
    lazy, default = figures["lazy"], figures["sentences"]
    if "seconds" not in lazy or "seconds" not in default:
        return {}
    vector = sum(default["stage_seconds"].get(k, 0.0) for k in ("ingest_chunk", "embed_chunks"))
    return {
        "lazy_over_default_seconds": round(lazy["seconds"] / default["seconds"], 2),
        "lazy_over_default_bytes": round(lazy["bytes"] / default["bytes"], 2),
        "vector_index_seconds": round(vector, 1),
        "lazy_over_vector_seconds": round(lazy["seconds"] / vector, 2) if vector else None,
    }


def main() -> None:
    """Build, query, compare and write one result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sets", default=None, help="default: musique,2wiki,hotpotqa (train: no 2wiki)"
    )
    ap.add_argument("--work", default=work_dir("text_graph"))
    ap.add_argument("--configs", default="before,sentences")
    ap.add_argument("--tag", default="")
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--against", default=None, help="tag of an earlier text_graph result")
    ap.add_argument("--runs", default=None, help="comma-separated run names besides bm25, naive")
    ap.add_argument("--train", action="store_true", help="the train sets, to pick a setting")
    ap.add_argument("--embedder", default=None, help="a packaged model or folder instead of MiniLM")
    ap.add_argument("--paired", default=None, help="A,B: B's R@5 minus A's, paired, per set")
    ap.add_argument("--trees", action="store_true", help="both trees in the default index")
    ap.add_argument("--lazy", action="store_true", help="LazyGraphRAG on its own index too")
    args = ap.parse_args()
    runs = RUNS_HERE
    lazy = lazy_runs(args.train) if args.lazy else {}
    if lazy:
        METHODS.update(lazy)
        BUILDS["lazy"] = LAZY_INDEX
    known = {**METHODS, **(TREE_RUNS if args.trees else {})}
    if args.runs:
        names = [*BASELINES, *(n for n in args.runs.split(",") if n not in BASELINES)]
        runs = {n: RUNS_HERE[n] if n in RUNS_HERE else known[n] for n in names}
    if args.trees:
        BUILDS["sentences"] += TREES
    chosen = args.sets or ("musique,hotpotqa" if args.train else "musique,2wiki,hotpotqa")
    sets = {f"{n}_train": TRAIN_SETS[n] for n in TRAIN_SETS} if args.train else DEV_SETS
    configs = args.configs.split(",")
    if "sentences" not in configs or not set(configs) <= set(CONFIGS):
        ap.error(f"--configs: a subset of {','.join(CONFIGS)} holding sentences")
    work = offline_work(args)
    builds, recall, best, pairs, extra = [], [], [], [], {}
    paired: dict[tuple[str, str], dict] = {}
    for name in (f"{n}_train" if args.train else n for n in chosen.split(",")):
        figures, per_q = {}, {}
        for config in [*configs, *(["lazy"] if lazy else [])]:
            corpus = DATA / sets[name][0]
            index, figures[config] = build_or_reuse(
                f"{name}-trees" if args.trees else name,
                corpus,
                config,
                work,
                args.reuse,
                args.embedder,
            )
            on_index, timings = (lazy if config == "lazy" else runs), {}
            rows, per_q[config] = recall_rows(
                index, DATA / sets[name][1], work, True, on_index, LAZY_MEANS, timings
            )
            if config == "lazy" and not builds and not args.train:  # the first set
                run = "lazygraphrag_z100"
                extra["batched_vs_single"] = batched_vs_single(
                    index, DATA / sets[name][1], work / "runs", run, timings[run]
                )
            # dense on the default index: the same chunks and questions as on the lazy one
            default = [r for r in recall if r["set"] == name and r["index"] == "sentences"]
            dense = next(r["R@5"] for r in [*rows, *default] if r["method"] == "naive")
            for r in rows:
                r["of_dense_R@5"] = round(r["R@5"] / dense, 3) if dense else None
                recall.append({"set": name, "index": config, **r})
        ratios = {
            f"{kind}_ratio": round(figures["sentences"][kind] / figures["before"][kind], 2)
            for kind in ("seconds", "cpu_seconds")
            if "seconds" in figures.get("before", {}) and "seconds" in figures["sentences"]
        }
        costs = index_costs(figures) if lazy else {}
        builds.append({"set": name, **figures, **ratios, **costs})
        per_q["sentences"].update(per_q.pop("lazy", {}))  # one run name, one question order
        now = [r for r in recall if r["set"] == name and r["index"] == "sentences"]
        base = max((r for r in now if r["method"] in BASELINES), key=lambda r: r["R@5"])
        graph = max((r for r in now if r["method"] not in BASELINES), key=lambda r: r["R@5"])
        if args.paired:  # B minus A on the default index, question by question
            a, b = args.paired.split(",")
            test = paired_test(per_q["sentences"][a], per_q["sentences"][b])
            pairs.append({"set": name, "difference": f"{b} - {a}", **_rounded(test)})
        for method in per_q.get("text_entities", {}):  # pooled minus embedded, question by question
            test = paired_test(per_q["text_entities"][method], per_q["sentences"][method])
            paired[(name, method)] = {k: v for k, v in _rounded(test).items() if k != "n"}
        diff = paired_test(per_q["sentences"][base["method"]], per_q["sentences"][graph["method"]])
        best.append(
            {
                "set": name,
                "best_graph": graph["method"],
                "best_baseline": base["method"],
                **_rounded(diff),
            }
        )
        if lazy:
            extra.update(lazy_figures(recall, args.train))
        _write(builds, recall, best, args.tag, args.against, paired, pairs, args.embedder, extra)
    for r in recall:
        print(
            f"{r['set']:<10}{r['index']:<11}{r['method']:<42}R@5 {r['R@5']:.3f} "
            f"{r['R@5_ci']} {r['of_dense_R@5']}x dense"
        )
    for b in best:
        print(b)


def _write(
    builds: list[dict],
    recall: list[dict],
    best: list[dict],
    tag: str,
    against: str | None,
    paired: dict[tuple[str, str], dict],
    pairs: list[dict],
    embedder: str | None = None,
    extra: dict | None = None,
) -> None:
    """The result so far (written after each set, so a cut-off run keeps the sets it did)."""
    figures = {"bench": "text_graph", "builds": builds, "recall": recall, **(extra or {})}
    figures["embedder"] = embedder or DEFAULT_EMBEDDER
    figures["trees"] = TREES in BUILDS["sentences"]
    figures["best_graph_minus_baseline"] = best
    if pairs:
        figures["paired_runs"] = pairs
    if any(r["index"] == "text_entities" for r in recall):
        figures["entity_vector_changes"] = entity_vector_changes(recall, paired)
    if against:
        figures[f"change_against_{against}"] = changes(recall, against)
    write_result("text_graph", figures, tag)


def _rounded(test: dict) -> dict:
    """A paired test's figures at 4 decimals."""
    return {k: round(v, 4) for k, v in test.items()}


def entity_vector_changes(recall: list[dict], paired: dict[tuple[str, str], dict]) -> list[dict]:
    """Per set and run, R@2 / R@5 on the default index (pooled entity vectors) minus those on
    the text_entities index (embedded ones), where both were queried, with the paired R@5
    difference's 95% interval and p-value over the same questions."""
    text = {(r["set"], r["method"]): r for r in recall if r["index"] == "text_entities"}
    out = []
    for r in recall:
        key = (r["set"], r["method"])
        if r["index"] != "sentences" or key not in text:
            continue
        row = {"set": r["set"], "method": r["method"]}
        row.update({f"{k} change": round(r[k] - text[key][k], 3) for k in ("R@2", "R@5")})
        test = paired.get(key, {})
        row.update({f"R@5 paired {k}": v for k, v in test.items() if k != "mean_diff"})
        out.append(row)
    return out


def changes(recall: list[dict], against: str) -> list[dict]:
    """Each default-index row's R@2 / R@5 beside those of the same set and method in the
    committed result text_graph-AGAINST.json, and the difference."""
    earlier = json.loads((RESULTS / f"text_graph-{against}.json").read_text())
    then = {
        (r["set"], r["method"]): r
        for r in earlier["figures"]["recall"]
        if r.get("index", "sentences") == "sentences"
    }
    out = []
    for r in recall:
        old = then.get((r["set"], r["method"]))
        if r["index"] != "sentences" or old is None:
            continue
        row = {"set": r["set"], "method": r["method"], "commit_then": earlier["commit"][:12]}
        for k in ("R@2", "R@5"):
            row[f"{k} then"], row[f"{k} now"] = old[k], r[k]
            row[f"{k} change"] = round(r[k] - old[k], 3)
        out.append(row)
    return out


if __name__ == "__main__":
    assert set(RUNS) >= set(BASELINES)
    main()
