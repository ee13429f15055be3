"""The whole LLM-free pipeline on a GPU against the same machine's CPU cores, in one run: index
tokens/s per stage, questions/s per method and stage, GPU memory peak, and how alike the GPU's
and the CPU's rankings are.

    python -m bench.gpu_pipeline [--device cuda] [--questions 1000] [--cpu-questions 100]
                                 [--slice-docs 300] [--methods bm25,naive,...] [--work DIR]
                                 [--reuse-index] [--cli-passes N] [--cli-first 200] [--tag TAG]

1. Index: the corpus (MuSiQue's by default) with the default LLM-free config (alpha 0, spaCy
   NER when installed) and the embedder on `--device`; then its first `--slice-docs` passages
   twice, on `--device` and on the CPU, so each stage's tokens/s has a same-run CPU reference.
2. Questions: `--questions` distinct questions (MuSiQue's dev and train questions, then 2Wiki's
   and HotpotQA's dev questions, all asked of the same index) through every LLM-free method of
   bench/llm_free.py on `--device`, and the first `--cpu-questions` of them on the CPU; the
   agreement of the two rankings on those questions.
3. With `--cli-passes N`: every method as a user runs it, `graphrag-engine query
   --retrieval-only` in a new process on the CPU, over those questions and over `--cli-first`
   others; the median over N passes of the marginal rate (the extra questions over the extra
   seconds: what a question costs beyond the process's start), beside dense retrieval's.

With `--device cpu` the run measures the CPU alone (the CI path, on a small slice). A GPU
machine that cannot see ../shared points GRAPHRAG_BENCH_DATA at a copy of the data.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import DATA, work_dir, write_result
from bench.llm_free import (
    METHODS,
    agreement,
    cli_rate,
    marginal_rate,
    method_config,
    time_method,
)
from graphrag_engine.config import IndexConfig
from graphrag_engine.eval.datasets import Question, load_questions
from graphrag_engine.index.pipeline import build_index
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.store import open_index

QUESTION_FILES = [
    "musique_dev.jsonl",
    "musique_train.jsonl",
    "2wikimultihopqa_dev.jsonl",
    "hotpotqa_dev.jsonl",
    "hotpotqa_train.jsonl",
    "multihoprag_dev.jsonl",
]
"""Where the questions come from, in order: MuSiQue's own first, then other multi-hop sets
(1,468 distinct texts)."""
DENSE = "naive"
"""The method every other one's questions/s is set against in the same run (dense retrieval)."""


def questions(n: int) -> list[Question]:
    """The first n distinct questions of QUESTION_FILES (each text once; a file is read only
    when the ones before it hold fewer, so a machine given the first files alone runs)."""
    out: list[Question] = []
    seen: set[str] = set()
    for name in QUESTION_FILES:
        if len(out) == n:
            break
        for q in load_questions(DATA / name):
            if q.question not in seen and len(out) < n:
                seen.add(q.question)
                out.append(q)
    if len(out) < n:
        raise SystemExit(f"only {len(out)} distinct questions in {QUESTION_FILES}, asked for {n}")
    return out


def write_slice(corpus: Path, docs: int, path: Path) -> None:
    """The corpus's first `docs` records."""
    with open(corpus, encoding="utf-8") as src, open(path, "w", encoding="utf-8") as out:
        for i, line in enumerate(src):
            if i == docs:
                break
            out.write(line)


def gpu_memory(device: str, reset: bool = False) -> float | None:
    """Peak GPU memory allocated by torch since the last reset, MiB (None on the CPU)."""
    if not device.startswith("cuda"):
        return None
    import torch

    peak = torch.cuda.max_memory_allocated(device) / 2**20
    if reset:
        torch.cuda.reset_peak_memory_stats(device)
    return round(peak, 1)


def index_figures(corpus: Path, out: Path, device: str, reuse: bool = False) -> dict[str, Any]:
    """Build the LLM-free index of `corpus` with the embedder on `device`: seconds, tokens/s of
    the whole build and of each stage (corpus tokens over the stage's seconds), GPU peak. With
    `reuse` an index already built at `out` is kept and its figures are those its manifest
    recorded when it was built (`reused`: true; seconds are the sum of its stages', counting
    the context lines' tokens among them)."""
    if reuse and (out / "manifest.json").exists():
        manifest = json.loads((out / "manifest.json").read_text())
        seconds = sum(v["seconds"] for v in manifest["stats"]["stages"].values())
        return {**_build_figures(manifest, device, seconds), "reused": True}
    shutil.rmtree(out, ignore_errors=True)  # a fresh build: no embedding cache from a last run
    cfg = IndexConfig()
    cfg.models.embedder.device = device
    gpu_memory(device, reset=True)
    started = time.perf_counter()
    manifest = build_index([corpus], out, cfg)
    return _build_figures(manifest, device, time.perf_counter() - started)


def _build_figures(manifest: dict[str, Any], device: str, seconds: float) -> dict[str, Any]:
    """An index build's figures from its manifest and wall seconds."""
    stages = manifest["stats"]["stages"]
    tokens = stages["ingest_chunk"]["tokens"]
    return {
        "device": device,
        "documents": stages["ingest_chunk"]["items"],
        "chunks": stages["ingest_chunk"]["chunks"],
        "tokens": tokens,
        "seconds": round(seconds, 2),
        "tokens_per_s": round(tokens / seconds, 1),
        "ner": manifest.get("models", {}).get("ner"),
        "stage_seconds": {k: v["seconds"] for k, v in stages.items()},
        "stage_tokens_per_s": {
            k: round(tokens / v["seconds"], 1) for k, v in stages.items() if v["seconds"] > 0
        },
        "gpu_peak_mib": gpu_memory(device),
    }


def method_figures(
    index_dir: Path, name: str, asked: list[Question], device: str, cpu_n: int, work: Path
) -> dict[str, Any]:
    """One method on `device` over every question and on the CPU over the first cpu_n, with the
    agreement of their rankings on those."""
    index = open_index(index_dir)
    warmup = asked[:2]
    gpu_memory(device, reset=True)
    cfg = method_config(name, device)
    on_device = time_method(QueryContext(index, cfg, work / name / device), asked, warmup)
    row: dict[str, Any] = {"method": METHODS[name][0], device: on_device.figures()}
    row["gpu_peak_mib"] = gpu_memory(device)
    if device != "cpu" and cpu_n > 0:
        cfg_cpu = method_config(name, "cpu")
        ctx_cpu = QueryContext(index, cfg_cpu, work / name / "cpu")
        on_cpu = time_method(ctx_cpu, asked[:cpu_n], warmup)
        row["cpu"] = on_cpu.figures()
        row["speedup"] = round(on_device.rate / on_cpu.rate, 2)
        mine, theirs = on_device.rankings[:cpu_n], on_cpu.rankings
        row["agreement"] = {**agreement(mine, theirs, 5), **agreement(mine, theirs, 20)}
    return row


def cli_figures(
    figures: dict[str, Any], asked: list[Question], first: list[Question], args: Any
) -> None:
    """Each method's rate through `graphrag-engine query` on the CPU (`llm_free.cli_rate`): a run
    over `first` and one over `asked` (no text in both, so no cache of one serves the other),
    `--cli-passes` times, methods taking turns; the median marginal rate goes in its row."""
    work = args.work / "cli"
    work.mkdir(parents=True, exist_ok=True)
    files = []
    for name, qs in (("first", first), ("asked", asked)):
        path = work / f"{name}.jsonl"
        path.write_text("".join(json.dumps(dataclasses.asdict(q)) + "\n" for q in qs))
        files.append(path)
    counts = (len(first), len(asked))
    names = [m for m, row in figures["methods"].items() if "error" not in row]
    passes: dict[str, list[tuple[float, float]]] = {m: [] for m in names}
    for p in range(args.cli_passes):
        for name in names:
            passes[name].append(cli_rate(args.work / "index", name, *files, counts, work))
            print(f"cli pass {p + 1} {name}: {passes[name][-1]}", file=sys.stderr, flush=True)
    for name in names:
        figures["methods"][name]["cli"] = marginal_rate(passes[name], counts)
    figures["cli"] = {"first": counts[0], "questions": counts[1], "passes": args.cli_passes}


def summary(figures: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The result's headline tables: tokens/s per index stage (the whole corpus on the device,
    the slice on the device and on the CPU); questions/s per method on each, as a share of dense
    retrieval's in the same run, and its milliseconds a question by stage."""
    device = figures["device"]
    full, same = figures["index"], figures.get("index_slice", {})
    stages = []
    for stage, rate in full["stage_tokens_per_s"].items():
        row = {"stage": stage, f"{device} tokens/s (corpus)": rate}
        if same:
            row[f"{device} tokens/s (slice)"] = same[device]["stage_tokens_per_s"].get(stage)
            row["cpu tokens/s (slice)"] = same["cpu"]["stage_tokens_per_s"].get(stage)
            row["x cpu"] = same["stage_speedup"].get(stage)
        stages.append(row)
    stages.append({"stage": "whole index", f"{device} tokens/s (corpus)": full["tokens_per_s"]})
    methods = []
    dense = figures["methods"].get(DENSE, {}).get(device, {}).get("questions_per_s")
    for name, row in figures["methods"].items():
        if "error" in row:
            methods.append({"method": name, "error": row["error"]})
            continue
        out = {"method": name, f"{device} q/s": row[device]["questions_per_s"]}
        if dense:  # the goal of issue 70: every LLM-free method at 1/3 of dense or more
            out["x dense"] = round(row[device]["questions_per_s"] / dense, 3)
        n = row[device]["questions"]
        out["ms/question by stage"] = {
            k: round(1000 * v / n, 3) for k, v in row[device]["stage_seconds"].items()
        }
        if "cpu" in row and device != "cpu":
            out["cpu q/s"] = row["cpu"]["questions_per_s"]
            out["x cpu"] = row["speedup"]
            out["top-5 identical"] = row["agreement"]["top5_identical"]
            out["top-20 identical"] = row["agreement"]["top20_identical"]
        out["gpu peak MiB"] = row.get("gpu_peak_mib")
        cli_dense = figures["methods"].get(DENSE, {}).get("cli", {}).get("questions_per_s")
        if row.get("cli", {}).get("questions_per_s") is not None:
            out["cli q/s"] = row["cli"]["questions_per_s"]
            if cli_dense:
                out["cli x dense"] = round(row["cli"]["questions_per_s"] / cli_dense, 3)
        methods.append(out)
    return {"index_stages": stages, "methods_table": methods}


def main() -> None:
    """Index, run every LLM-free method on the device and a CPU sample, write one result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--corpus", type=Path, default=None, help="default: MuSiQue's corpus")
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--cpu-questions", type=int, default=100)
    ap.add_argument("--slice-docs", type=int, default=300)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--work", type=Path, default=Path(work_dir("gpu_pipeline")))
    ap.add_argument("--tag", default="", help="result file bench/results/gpu_pipeline-TAG.json")
    ap.add_argument(
        "--reuse-index",
        action="store_true",
        help="keep an index already built in WORK (its figures are its manifest's)",
    )
    ap.add_argument("--cli-passes", type=int, default=0, help="also time the CLI, N passes")
    ap.add_argument("--cli-first", type=int, default=200, help="questions of the CLI's first run")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            sys.exit("bench.gpu_pipeline: --device cuda needs a CUDA GPU; use --device cpu")
    corpus = args.corpus or DATA / "musique_corpus.jsonl"
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"corpus": corpus.name, "device": args.device}

    def log(what: str, value: Any) -> None:
        print(json.dumps({what: value}), file=sys.stderr, flush=True)

    figures["index"] = index_figures(corpus, work / "index", args.device, args.reuse_index)
    log("index", figures["index"])
    if args.device != "cpu" and args.slice_docs > 0:
        write_slice(corpus, args.slice_docs, work / "slice.jsonl")
        same_slice = {
            d: index_figures(work / "slice.jsonl", work / f"slice-{d}", d)
            for d in (args.device, "cpu")
        }
        same_slice["stage_speedup"] = {
            k: round(same_slice["cpu"]["stage_seconds"][k] / s, 2)
            for k, s in same_slice[args.device]["stage_seconds"].items()
            if s > 0 and k in same_slice["cpu"]["stage_seconds"]
        }
        figures["index_slice"] = same_slice
        log("index_slice", same_slice)
    asked = questions(args.questions)
    figures["questions"] = len(asked)
    figures["methods"] = {}
    for name in args.methods.split(","):
        try:
            row = method_figures(
                work / "index", name, asked, args.device, args.cpu_questions, work / "runs"
            )
        except Exception as exc:  # one method's failure is a figure, not the end of the run
            row = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        figures["methods"][name] = row
        log(name, row)
    if args.cli_passes:
        cli_figures(figures, asked, questions(len(asked) + args.cli_first)[len(asked) :], args)
    write_result("gpu_pipeline", {**summary(figures), **figures}, tag=args.tag)


if __name__ == "__main__":
    main()
