"""LLM-free indexing, the default against the fast paths, each a fresh index in one run: fp32
MiniLM with 64 texts a forward pass and every table embedded (`batch64`, the default before
token-budget batches), the default (batches of 2,048 padded tokens), relation vectors left lazy
(`graph.relation_vectors: lazy`), the int8 ONNX Runtime embedder with lazy relations
(`embedder.backend: onnx-int8`), `fast32`: fp32 with lazy relation and unit vectors (for an
index no Clue-RAG run will query), `fast`: the same with int8, and `onnx32`: the same with fp32
ONNX Runtime (`embedder.backend: onnx`). Index seconds per stage and the ratio to the first variant,
then Recall@2/@5 of dense and PPR retrieval on the set's dev questions against each index
(neither uses relation or unit vectors, so the fp32 rows must agree, as must the int8 ones),
and the largest change of those four recalls from the first variant, in points.

    .venv/bin/python -m bench.fast_index [--sets musique] [--variants batch64,default,lazy,int8,fast32,fast,onnx32]
                                         [--work DIR]

Each index is a fresh `graphrag-engine index` process with fresh caches (the int8 model itself
is exported once into its own cache before the timed runs). Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
from pathlib import Path

from bench.common import index_in_child, work_dir, write_result
from bench.retrieval import DATA, SETS
from graphrag_engine.cli import main as cli
from graphrag_engine.models.onnx_embed import BACKENDS, OnnxEmbedder

VARIANTS = {
    "batch64": "graph:\n  alpha: 0.0\nmodels:\n  embedder:\n    batch_size: 64\n",
    "default": "graph:\n  alpha: 0.0\n",
    "lazy": "graph:\n  alpha: 0.0\n  relation_vectors: lazy\n",
    "int8": "graph:\n  alpha: 0.0\n  relation_vectors: lazy\nmodels:\n  embedder:\n"
    "    backend: onnx-int8\n",
    "fast32": "graph:\n  alpha: 0.0\n  relation_vectors: lazy\n  unit_vectors: lazy\n",
    "fast": "graph:\n  alpha: 0.0\n  relation_vectors: lazy\n  unit_vectors: lazy\n"
    "models:\n  embedder:\n    backend: onnx-int8\n",
    "onnx32": "graph:\n  alpha: 0.0\n  relation_vectors: lazy\n  unit_vectors: lazy\n"
    "models:\n  embedder:\n    backend: onnx\n",
}
METHODS = ("naive", "hipporag")


def recall(index: Path, questions: Path, work: Path) -> dict[str, dict]:
    """Recall@2/@5 (mean, 95% CI; five digits, so the shift between variants is exact) of each
    retrieval method against one index."""
    runs = []
    for method in METHODS:
        out = work / method
        args = ["query", str(index), str(questions), "--method", method, "--retrieval-only"]
        assert cli([*args, "--label", method, "--out", str(out)]) == 0
        runs.append(str(out))
    report = work / "report"
    assert cli(["eval", *runs, "--out", str(report), "--k", "2,5"]) == 0
    rows = list(csv.DictReader((report / "summary.csv").open()))
    return {
        m: {
            f"R@{k}": [
                round(float(r[c]), 5)
                for r in rows
                if r["run"] == m and r["metric"] == f"recall@{k}"
                for c in ("mean", "ci_low", "ci_high")
            ]
            for k in (2, 5)
        }
        for m in METHODS
    }


def recall_shift(got: dict, ref: dict) -> float:
    """The largest change of a method's R@2 or R@5 from the reference variant's (a fraction)."""
    return max(abs(got[m][k][0] - ref[m][k][0]) for m in METHODS for k in ("R@2", "R@5"))


def main() -> None:
    """Index each set once per variant, time it, score retrieval; print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="musique")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--work", default=work_dir("fast-index"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    variants = args.variants.split(",")
    os.environ.setdefault("GRAPHRAG_ONNX_CACHE", str(work / "onnx"))
    for backend, scheme in BACKENDS.items():  # export once, outside the timed builds
        if any(f"backend: {backend}\n" in VARIANTS[v] for v in variants):
            OnnxEmbedder(scheme=scheme)
    rows = []
    for name in args.sets.split(","):
        corpus, questions = SETS[name]
        for variant in variants:
            out = work / name / variant
            shutil.rmtree(out, ignore_errors=True)
            run = index_in_child(DATA / corpus, out, VARIANTS[variant])
            stages = run["manifest"]["stats"]["stages"]
            row = {
                "set": name,
                "variant": variant,
                "seconds": round(run["seconds"], 1),
                "peak_rss_mib": run["peak_rss_mib"],
                "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
                "embedded": stages["embed_chunks"]["items"] + stages["embed"]["items"],
                "recall": recall(out, DATA / questions, work / name / f"runs-{variant}"),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    base = {r["set"]: r["seconds"] for r in rows if r["variant"] == variants[0]}
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(
        f"{'set':<9}{'variant':<9}{'index s':>8}{'x ' + variants[0]:>11}{'texts':>8}"
        f"{'chunks s':>9}{'tables s':>9}{'NER s':>7}"
        + "".join(f"{m + ' R@2/R@5':>22}" for m in METHODS)
        + f"{'max |dR| pt':>13}"
    )
    first = {r["set"]: r["recall"] for r in rows if r["variant"] == variants[0]}
    for r in rows:
        st = r["stage_seconds"]
        cells = "".join(
            f"{r['recall'][m]['R@2'][0]:>14.3f} / {r['recall'][m]['R@5'][0]:.3f}" for m in METHODS
        )
        print(
            f"{r['set']:<9}{r['variant']:<9}{r['seconds']:>8}{base[r['set']] / r['seconds']:>10.2f}x"
            f"{r['embedded']:>8}{st.get('embed_chunks', 0):>9.1f}{st.get('embed', 0):>9.1f}"
            f"{st.get('ner', 0):>7.1f}{cells}{100 * recall_shift(r['recall'], first[r['set']]):>13.2f}"
        )
    write_result("fast_index", {"bench": "fast_index", "rows": rows})


if __name__ == "__main__":
    main()
