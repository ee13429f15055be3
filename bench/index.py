"""Indexing throughput on real corpora: MuSiQue and 2WikiMultiHopQA from ../shared/data with
alpha = 0 (no LLM) on the local and the Ray executor, and the Clue-RAG index modes alpha = 0,
0.5 and 1 (LLM knowledge units from the packaged SmolLM2 on the knapsack's core chunks, with
the indexing tokens of each) on a sample of MuSiQue passages. Every run is a fresh
`graphrag-engine index` process with fresh caches; measured in one run on this machine.

    .venv/bin/python -m bench.index [--corpora musique,2wiki] [--executors local,ray]
                                    [--llm-sample 50] [--alphas 0,0.5,1]

`--corpora ''` runs only the sample.

Peak RSS is the index process's own (Ray workers are separate processes and not included).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bench.common import DATA, index_in_child, write_result
from graphrag_engine.models import llm_yaml

FILES = {"musique": "musique_corpus.jsonl", "2wiki": "2wikimultihopqa_corpus.jsonl"}


def run_index(corpus: Path, work: Path, name: str, config: str, extra: list[str]) -> dict:
    """One fresh index process; its wall time, peak RSS and manifest stats."""
    run = index_in_child(corpus, work / name, config, extra)
    seconds, m = run["seconds"], run["manifest"]
    files, stages = m["files"], m["stats"]["stages"]
    rows = {k: v.get("rows", v.get("shape", [0])[0]) for k, v in files.items()}
    edges = sum(g["edges"] for g in m["stats"].get("graphs", {}).values())
    return {
        "seconds": round(seconds, 1),
        "chunks": rows["chunks"],
        "units": rows.get("units", 0),
        "entities": rows.get("entities", 0),
        "relations": rows.get("relations", 0),
        "graph_edges": edges,
        "chunks_per_s": round(rows["chunks"] / seconds, 1),
        "units_per_s": round(rows.get("units", 0) / seconds, 1),
        "peak_rss_mib": run["peak_rss_mib"],
        "peak_rss_exact": run["peak_rss_exact"],
        "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
        "llm": {
            k: v
            for k, v in stages.get("units", {}).items()
            if k
            in (
                "model_calls",
                "parse_failures",
                "llm_units",
                "core_chunks",
                "prompt_tokens",
                "completion_tokens",
            )
        },
    }


def main() -> None:
    """Run the benchmark and print a table and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", default="musique,2wiki")
    ap.add_argument("--executors", default="local,ray")
    ap.add_argument("--llm-sample", type=int, default=50, help="passages; 0 skips the sample")
    ap.add_argument("--alphas", default="0,0.5,1", help="index modes run on the sample")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="graphrag-index-bench-"))
    results = []
    for corpus in filter(None, args.corpora.split(",")):
        path = DATA / FILES[corpus]
        for ex in args.executors.split(","):
            extra = ["--executor", ex] + (["--address", "local"] if ex == "ray" else [])
            r = run_index(path, work, f"{corpus}-{ex}", "graph:\n  alpha: 0.0\n", extra)
            results.append({"corpus": corpus, "executor": ex, "mode": "alpha=0", **r})
    if args.llm_sample:
        sample = work / "sample.jsonl"
        with open(DATA / FILES["musique"]) as fh:
            sample.write_text(
                "".join(line for _, line in zip(range(args.llm_sample), fh, strict=False))
            )
        for alpha in (float(a) for a in args.alphas.split(",")):
            config = f"graph:\n  alpha: {alpha}\n  unit_max_tokens: 128\n" + llm_yaml(
                backend="transformers", batch_size=8
            )
            r = run_index(sample, work, f"sample-alpha{alpha}", config, [])
            mode = f"alpha={alpha:g}" + (", SmolLM2" if alpha > 0 else "")
            results.append(
                {"corpus": f"musique[:{args.llm_sample}]", "executor": "local", "mode": mode, **r}
            )
    print(
        f"{'corpus':<14}{'executor':<9}{'mode':<18}{'chunks':>7}{'units':>7}{'entities':>9}{'edges':>8}{'s':>7}{'chunks/s':>9}{'units/s':>8}{'RSS MiB':>8}"
        f"{'core':>6}{'failed':>7}{'prompt tok':>11}{'compl. tok':>11}"
    )
    for r in results:
        print(
            f"{r['corpus']:<14}{r['executor']:<9}{r['mode']:<18}{r['chunks']:>7}{r['units']:>7}{r['entities']:>9}"
            f"{r['graph_edges']:>8}{r['seconds']:>7}{r['chunks_per_s']:>9}{r['units_per_s']:>8}{r['peak_rss_mib']:>8}"
            f"{r['llm'].get('core_chunks', 0):>6}{r['llm'].get('parse_failures', 0):>7}"
            f"{r['llm'].get('prompt_tokens', 0):>11}{r['llm'].get('completion_tokens', 0):>11}"
        )
    write_result("index", {"bench": "index", "results": results})
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
