"""Text without an LLM, decided on the train sets: each train corpus (MuSiQue, HotpotQA) is
indexed three times in the same run, with nothing cached, once as before (relations "source -
target" with no description, entities with none, no synonym edges) and once with today's
defaults (sentence descriptions, content-word keywords, sentence-mean relation vectors,
synonym edges), and once more with concept noun phrases among the entities (`graph.ner:
spacy_concepts`); the build times and their ratio, then R@2 / R@5 (95% bootstrap intervals) of
BM25, dense and every LLM-free entity-graph method on both indexes, HippoRAG-style PPR with
and without the synonym edges, and ReGraphRAG reranking with its edge texts or the relation
vectors.

    .venv/bin/python -m bench.descriptions [--sets musique,hotpotqa] [--work DIR]
        [--entity-vectors]

`--entity-vectors` decides how a sentence-described entity gets its vector instead: each train
corpus is indexed twice in the same run, with nothing cached, with today's defaults (its name's
vector pooled with its sentences' unit vectors, `graph.entity_vectors: pooled`) and with its
"name: sentences" embedded as one text (`text`, as before). Written to
descriptions-entity_vectors.json: both build times and their ratio, how close the pooled
vectors come to the embedded ones (cosine; overlap of the 5 nearest entities to 500 entities'
embedded vectors), R@2 / R@5 of every run on both indexes and their differences. The pooling
was chosen on MuSiQue's train index alone: weighting the name and each sentence by its
characters came closest to the embedded vectors (mean cosine .961; by tokens .963, which needs
the tokenizer; the sentences' plain mean .954; name and that mean equally .879). The rule was
fixed before the bench ran: pooled is the default if, on train, its mean R@5 over the
entity-graph runs is at most .005 below the text vectors'.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import time
from pathlib import Path

import numpy as np

from bench.common import DATA, offline_work, work_dir, write_result
from bench.linearrag import TRAIN_SETS
from bench.llm_free import METHODS, method_config, time_method
from graphrag_engine.cli import main as cli
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.eval.metrics import bootstrap_ci, recall_at_k
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.store import open_index

SENTENCES = (
    "graph:\n  alpha: 0.0\n  entity_sentences: 3\n  relation_sentences: 2\n"
    "  synonym_threshold: 0.8\n"
)
"""Sentence descriptions and synonym edges, as this bench measured them."""
BUILDS = {
    "before": (
        "graph:\n  alpha: 0.0\n  entity_sentences: 0\n  relation_sentences: 0\n"
        "  synonym_threshold: 2.0\n"
    ),
    "sentences": SENTENCES,
    "concepts": SENTENCES + "  ner: spacy_concepts\n",
    "text_entities": SENTENCES + "  entity_vectors: text\n",
}
"""Index configs: as the LLM-free index was, today's defaults, today's defaults with the
concept noun phrases among the entities, and today's defaults with every entity's vector
embedded from its "name: sentences" text (`--entity-vectors`)."""
COMPARED = ("before", "sentences", "concepts")
"""The configs this bench builds."""
RUNS = {
    "bm25": METHODS["bm25"],
    "naive": METHODS["naive"],
    "hipporag": METHODS["hipporag"],
    "hipporag_no_synonyms": ("hipporag", {"synonyms": False}),
    "linearrag": METHODS["linearrag"],
    "lightrag_hybrid_ner": METHODS["lightrag_hybrid_ner"],
    "lightrag_mix_ner": ("lightrag", {"keywords": "ner", "mode": "mix"}),
    "graphrag_local": METHODS["graphrag_local"],
    "rograg_dual_level_ner": METHODS["rograg_dual_level_ner"],
    # its own name: bench/llm_free.py's "regraphrag_no_expansion" reranks by relation vectors,
    # and a run name already in METHODS keeps METHODS' settings
    "regraphrag_no_expansion_with_ends": (
        "regraphrag",
        {"expansion": False, "edge_text": "with_ends"},
    ),
    "regraphrag_no_expansion_relation_vectors": (
        "regraphrag",
        {"expansion": False, "edge_text": "relation"},
    ),
    "pankrag_no_path": METHODS["pankrag_no_path"],
}
"""run name: (registered method, its LLM-free settings)."""


def index_path(name: str, config: str, work: Path, embedder: str | None = None) -> Path:
    """Where `build` puts the NAME index of CONFIG (with EMBEDDER, if not the default) in WORK."""
    return work / "idx" / f"{name}-{config}{'-' + Path(embedder).name if embedder else ''}"


def build_or_reuse(
    name: str, corpus: Path, config: str, work: Path, reuse: bool, embedder: str | None = None
) -> tuple[Path, dict]:
    """`build`, or with `reuse` the index it already built there (figures: reused)."""
    out = index_path(name, config, work, embedder)
    if reuse and (out / "manifest.json").exists():
        return out, {"reused": True}
    return build(name, corpus, config, work, embedder)


def build(
    name: str, corpus: Path, config: str, work: Path, embedder: str | None = None
) -> tuple[Path, dict]:
    """A fresh index of `corpus` (nothing cached) at WORK/idx/NAME-CONFIG[-EMBEDDER]: its wall
    and CPU seconds (CPU seconds move less than wall seconds when other work shares the cores),
    the load average around it, stage seconds, bytes on disk (caches aside) and peak memory.
    Queries embed as the index did (`embedder_config`), so EMBEDDER serves them too."""
    out = index_path(name, config, work, embedder)
    shutil.rmtree(out, ignore_errors=True)
    cfg = work / f"descriptions-{out.name.removeprefix(name + '-')}.yaml"
    models = f"models:\n  embedder:\n    model: {embedder}\n" if embedder else ""
    cfg.write_text(BUILDS[config] + models)
    load_before, cpu0, t0 = os.getloadavg()[0], _cpu_seconds(), time.perf_counter()
    assert cli(["index", str(corpus), "--out", str(out), "--config", str(cfg)]) == 0
    seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    index = open_index(out)
    stages = index.manifest["stats"]["stages"]
    files = [p for p in out.rglob("*") if p.is_file() and "cache" not in p.name]
    figures = {
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "stage_seconds": {k: v["seconds"] for k, v in stages.items()},
        "bytes": sum(p.stat().st_size for p in files),
        "peak_rss_mb": max(v.get("peak_rss_mb", 0) for v in stages.values()),
        "documents": index.rows("documents"),
    }
    return out, figures


def _cpu_seconds() -> float:
    """User plus system CPU seconds this process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def recall_rows(
    index: Path,
    questions: Path,
    work: Path,
    per_question: bool = False,
    runs: dict[str, tuple[str, dict]] | None = None,
    means: tuple[str, ...] = (),
    timings: dict | None = None,
) -> list[dict] | tuple[list[dict], dict[str, list[float]]]:
    """R@2 / R@5 with intervals and questions/s of every run (RUNS unless `runs`) on one
    index, with the mean per question of each extra in `means` a run records (and, with
    `per_question`, each run's R@5 per question for paired comparisons); `timings`, when
    given, receives each run's Timing by run name."""
    qs = load_questions(questions)
    rows, r5 = [], {}
    for run, (method, settings) in (runs or RUNS).items():
        METHODS.setdefault(run, (method, settings))
        ctx = QueryContext(open_index(index), method_config(run, "cpu"), work / "runs")
        timing = time_method(ctx, qs)
        if timings is not None:
            timings[run] = timing
        passage = ctx.chunks["passage"]
        row: dict = {"method": run}
        for k in (2, 5):
            values = []
            for q, chunks in zip(qs, timing.rankings, strict=True):
                ranked = list(dict.fromkeys(passage[c] for c in chunks))
                values.append(recall_at_k(ranked, q.supporting_ids, k))
            mean, lo, hi = bootstrap_ci(values)
            row[f"R@{k}"] = round(mean, 3)
            row[f"R@{k}_ci"] = [round(lo, 3), round(hi, 3)]
        r5[run] = values
        row["q_per_s"] = round(timing.rate, 1)
        for key in (k for k in means if any(k in e for e in timing.extras)):
            row[f"{key}/q"] = round(float(np.mean([e.get(key, 0) for e in timing.extras])), 2)
        rows.append(row)
    return (rows, r5) if per_question else rows


ENTITY_CONFIGS = ("sentences", "text_entities")
"""`--entity-vectors`' configs: pooled entity vectors (the default), embedded ones."""
NO_ENTITIES = ("bm25", "naive")
"""Runs that read no entity vector."""


def agreement(pooled: np.ndarray, text: np.ndarray, queries: int = 500) -> dict:
    """Cosine of each entity's pooled vector to its embedded one, and the overlap of the 5
    nearest entities to `queries` entities' own text vectors under both tables."""
    cosine = np.sum(pooled * text, axis=1)
    picked = np.random.default_rng(0).choice(len(text), min(queries, len(text)), replace=False)
    q = text[picked]
    near_text = np.argsort(-(q @ text.T), axis=1)[:, :5]
    near_pooled = np.argsort(-(q @ pooled.T), axis=1)[:, :5]
    overlap = [len(set(a) & set(b)) / 5 for a, b in zip(near_text, near_pooled, strict=True)]
    return {
        "cosine_mean": round(float(cosine.mean()), 4),
        "cosine_p5": round(float(np.percentile(cosine, 5)), 4),
        "top5_overlap": round(float(np.mean(overlap)), 3),
    }


def entity_vectors(sets: list[str], work: Path) -> None:
    """Both entity-vector indexes per train set: their vectors and recall compared, one result."""
    builds, recall, changes, gaps = [], [], [], []
    for name in sets:
        corpus, questions = TRAIN_SETS[name]
        times, rows, vectors = {}, {}, {}
        for config in ENTITY_CONFIGS:
            index, times[config] = build(f"{name}_train", DATA / corpus, config, work)
            vectors[config] = np.asarray(open_index(index).vectors("entity_vectors"))
            rows[config] = {r["method"]: r for r in recall_rows(index, DATA / questions, work)}
        ratio = round(times["sentences"]["seconds"] / times["text_entities"]["seconds"], 2)
        builds.append(
            {
                "set": f"{name} train",
                **times,
                "pooled_over_text_seconds": ratio,
                **agreement(vectors["sentences"], vectors["text_entities"]),
            }
        )
        for method, pooled in rows["sentences"].items():
            text = rows["text_entities"][method]
            diff = {f"{k}_diff": round(pooled[k] - text[k], 3) for k in ("R@2", "R@5")}
            changes.append({"set": f"{name} train", "method": method, **diff})
            recall.extend(
                {"set": f"{name} train", "index": c, **rows[c][method]} for c in ENTITY_CONFIGS
            )
            if method not in NO_ENTITIES:
                gaps.append(diff["R@5_diff"])
            print(f"{name:<10}{method:<44}R@5 {text['R@5']:.3f} -> {pooled['R@5']:.3f}")
    mean_gap = round(float(np.mean(gaps)), 4)
    decision = "pooled" if mean_gap >= -0.005 else "text"
    print(f"mean R@5 change over the entity-graph runs: {mean_gap:+.4f} -> default {decision}")
    write_result(
        "descriptions",
        {
            "bench": "descriptions",
            "builds": builds,
            "recall": recall,
            "changes": changes,
            "mean_graph_R@5_diff": mean_gap,
            "default": decision,
        },
        tag="entity_vectors",
    )


def main() -> None:
    """Build, query and write one result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="musique,hotpotqa")
    ap.add_argument("--work", default=work_dir("descriptions"))
    ap.add_argument("--entity-vectors", action="store_true", help="pooled against text vectors")
    args = ap.parse_args()
    work = offline_work(args)
    if args.entity_vectors:
        entity_vectors(args.sets.split(","), work)
        return
    builds, recall = [], []
    for name in args.sets.split(","):
        corpus, questions = TRAIN_SETS[name]
        times = {}
        for config in COMPARED:
            index, times[config] = build(f"{name}_train", DATA / corpus, config, work)
            for row in recall_rows(index, DATA / questions, work):
                recall.append({"set": f"{name} train", "index": config, **row})
        ratios = {
            f"{c}_over_before": round(times[c]["seconds"] / times["before"]["seconds"], 2)
            for c in ("sentences", "concepts")
        }
        builds.append({"set": f"{name} train", **times, "build_time_ratio": ratios})
    for r in recall:
        print(f"{r['set']:<16}{r['index']:<11}{r['method']:<42}R@5 {r['R@5']:.3f} {r['R@5_ci']}")
    for b in builds:
        print(f"{b['set']}: build time / before: {b['build_time_ratio']}")
    write_result("descriptions", {"bench": "descriptions", "builds": builds, "recall": recall})


if __name__ == "__main__":
    main()
