"""Pairwise LLM-judge runs on UltraDomain CS (41 questions on four books), the protocol of the
LightRAG and ReGraphRAG papers: each method answers with the same LLM and answer budget, and
each pair is judged on comprehensiveness, diversity, empowerment and overall, in both orders.

    .venv/bin/python -m bench.judge_ultradomain [--preset hybrid|regraphrag|pankrag|lazy] [--work DIR]
        [--limit N] [--chars-per-book N] [--answer-tokens 200] [--llm-backend llama|transformers|openai]
        [--batch-size 16]
        [--base-url URL --llm-model NAME]

Presets: `lazy` (issue 97): LazyGraphRAG (Z100, SmolLM2 refining, testing and drawing
claims) and DRIFT search, each vs GraphRAG global search, on a concept graph with communities
and extractive reports. `hybrid` (issue 17): LightRAG-style hybrid vs NaiveRAG. `regraphrag` (issue 18):
ReGraphRAG vs NaiveRAG, HyDE and LightRAG-style hybrid, and its three ablations (w/o P-exp,
w/o Reorg, w/o Rerank) vs the full method. `pankrag` (issue 19): PankRAG (SmolLM2 plans,
level-synchronous sub-answers) vs NaiveRAG and LightRAG-style hybrid. Presets sharing a WORK
share their methods' answered runs. `--llm-backend llama` (default) serves the packaged
SmolLM2 from a real llama.cpp server on 127.0.0.1; `openai` with `--base-url` and `--llm-model`
sends every prompt (answers and verdicts) to any OpenAI-compatible server, e.g. vLLM with a
7B+ model, which is what gives the protocol meaning. With SmolLM2-135M as answerer and judge
this exercises the path end to end and gives a floor, not a claim: a 135M judge's verdicts
carry little signal. The index (alpha = 0, no LLM: NER entities, co-occurrence relations) is
built under WORK once and reused; answered runs and judged pairs resume.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import time
from contextlib import ExitStack
from pathlib import Path

import yaml

from bench.common import DATA, REPO, work_dir, write_result
from bench.global_search import slice_corpus
from bench.method_runs import judge_flags
from graphrag_engine.cli import main as cli

METHODS = {  # run name: (config, `key: value` overrides of its method section)
    "hybrid": ("configs/methods/lightrag.yaml", ()),
    "naive": ("configs/methods/naive.yaml", ()),
    "hyde": ("configs/methods/hyde.yaml", ()),
    "regraphrag": ("configs/methods/regraphrag.yaml", ()),
    "rg_no_pexp": ("configs/methods/regraphrag.yaml", ("expansion: false",)),
    "rg_no_reorg": ("configs/methods/regraphrag.yaml", ("reorganize: false",)),
    "rg_no_rerank": ("configs/methods/regraphrag.yaml", ("rerank: false",)),
    "pankrag": ("configs/methods/pankrag.yaml", ()),
    "global": ("configs/methods/graphrag_global.yaml", ()),
    "drift": ("configs/methods/drift.yaml", ()),
    "lazygraphrag": ("configs/methods/lazygraphrag.yaml", ()),
}
PRESETS = {  # pairs judged (first, second)
    "hybrid": [("hybrid", "naive")],
    "regraphrag": [("regraphrag", x) for x in ("naive", "hyde", "hybrid")]
    + [("regraphrag", x) for x in ("rg_no_pexp", "rg_no_reorg", "rg_no_rerank")],
    "pankrag": [("pankrag", x) for x in ("naive", "hybrid")],
    "lazy": [("lazygraphrag", "global"), ("drift", "global")],
}
INDEXES = {
    "lazy": ("configs/index-lazygraphrag.yaml", {"communities": {"extractive_reports": True}})
}
"""Presets whose methods need another index than the default (WORK/idx-PRESET): the config
and what the preset changes in it. `lazy`: LazyGraphRAG's concept graph and communities, with
the extractive reports global search and DRIFT read (LazyGraphRAG reads none)."""


def index_config(work: Path, preset: str) -> list[str]:
    """`--config` flags of the preset's own index config (none for the default index)."""
    if preset not in INDEXES:
        return []
    spec, changes = INDEXES[preset]
    cfg = yaml.safe_load((REPO / spec).read_text())
    for section, keys in changes.items():
        cfg.setdefault(section, {}).update(keys)
    path = work / f"index-{preset}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return ["--config", str(path)]


def answer_config(
    work: Path, name: str, answer_tokens: int, batch_size: int, window: int | None
) -> Path:
    """The method's config with its overrides, the answer budget raised for long answers, the
    answer window (`window` tokens; None: the model's), and the in-process backend's batch size."""
    spec, overrides = METHODS[name]
    pinned = f"\n  long_max_tokens: {answer_tokens}"  # UltraDomain answers are long-form
    pinned += f"\n  max_context_tokens: {window}" if window else ""
    text = re.sub(
        r"(?m)^(generation:\n(?:  .*\n)*?  max_tokens: )\d+",
        lambda m: f"{m.group(1)}{answer_tokens}{pinned}",
        (REPO / spec).read_text(),
    )
    assert f"max_tokens: {answer_tokens}" in text, f"{spec} has no generation.max_tokens"
    # llama-cpp-python's server answers one request at a time: send one at a time, and give a
    # long answer prompt on one thread the minutes it takes (queued requests timed out at 120 s);
    # a stage a small model fails is recorded (the cost table counts it), not a stopped bench
    llm = f"  llm:\n    concurrency: 1\n    read_timeout_s: 1800\n    batch_size: {batch_size}\n"
    llm += "    max_failed_share: 1.0\n"
    text = re.sub(r"(?m)^  llm:\n", llm, text, count=1)
    for override in overrides:
        key = override.split(":")[0]
        text = re.sub(rf"(?m)^  {key}:.*$", f"  {override}", text)
    path = work / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def cost_lines(work: Path, names: list[str]) -> list[str]:
    """Per method: seconds and LLM calls (re-asks included) and tokens per question by stage,
    with the prompts whose answer never validated, from each answered run's summary.json."""
    lines = ["| method | s / question | stage: calls, prompt + completion tokens per question |"]
    lines.append("| --- | --- | --- |")
    for name in names:
        summary = json.loads((work / "runs" / name / "summary.json").read_text())
        n = summary["questions"]
        stages = []
        for key, u in summary["llm"].items():
            calls = (u["calls"] + u["cached_calls"]) / n
            tokens = (u["prompt_tokens"] + u["cached_prompt_tokens"]) / n
            tokens_out = (u["completion_tokens"] + u["cached_completion_tokens"]) / n
            failed = f", {u['parse_failures']} failed" if u.get("parse_failures") else ""
            stages.append(
                f"{key.split('/')[0]}: {calls:.2f}, {tokens:.0f} + {tokens_out:.0f}{failed}"
            )
        # a resumed run's summary times only the questions it answered this time
        fresh = n - summary.get("resumed_questions", 0)
        secs = f"{summary['seconds'] / fresh:.2f}" if fresh else "(resumed: see its first run)"
        lines.append(f"| {name} | {secs} | {'; '.join(stages)} |")
    return lines


def bias_lines(work: Path, pairs: list[tuple[str, str]]) -> list[str]:
    """Per judged pair, on "overall": A's win rate (both orders averaged), the judge's position
    bias (first shown, consistent) and verdict counts, from each report's judge_verdicts.csv."""
    from graphrag_engine.eval.judge import win_rates

    lines = ["| A vs B | A wins (overall) | first shown | consistent | judged (unparsable) |"]
    lines.append("| --- | --- | --- | --- | --- |")
    for a, b in pairs:
        with (work / "reports" / f"{a}_vs_{b}" / "judge_verdicts.csv").open() as f:
            rows = list(csv.DictReader(f))
        (w,) = [w for w in win_rates(rows) if w["criterion"] == "overall"]
        wins = (
            f"{100 * w['win_a']:.1f}%"
            if w["informative"]
            else f"uninformative (position bias {100 * w['position_bias']:.1f}%)"
        )
        cells = [wins, *(f"{100 * w[k]:.1f}%" for k in ("first_shown", "consistent"))]
        lines.append(f"| {a} vs {b} | {' | '.join(cells)} | {w['judged']} ({w['unparsable']}) |")
    return lines


def main() -> None:
    """Index, answer with every method of the preset, judge its pairs; print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=list(PRESETS), default="hybrid")
    ap.add_argument("--work", default=work_dir("judge-ultradomain"))
    ap.add_argument("--limit", type=int, default=41)
    ap.add_argument(
        "--chars-per-book",
        type=int,
        default=0,
        help="index only each book's first N characters (0: whole books); a separate WORK, "
        "since answered runs resume",
    )
    ap.add_argument("--answer-tokens", type=int, default=200)
    ap.add_argument(
        "--answer-window",
        type=int,
        default=2048,
        help="tokens of context in an answer prompt (2048: the llama.cpp slot SmolLM2 is served "
        "in, as the published runs used); 0: the model's own window (a capable model)",
    )
    ap.add_argument("--llm-backend", default="llama", choices=["llama", "transformers", "openai"])
    ap.add_argument("--batch-size", type=int, default=16, help="transformers: prompts per pass")
    ap.add_argument("--base-url", help="openai: the server's /v1 URL")
    ap.add_argument("--llm-model", help="openai: the served model's name")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    own = args.preset in INDEXES
    cut = f"-{args.chars_per_book}" if args.chars_per_book else ""
    index = work / (f"idx-{args.preset}{cut}" if own else f"idx{cut}")
    if not (index / "manifest.json").exists():
        corpus = DATA / "ultradomain_cs_corpus.jsonl"
        if args.chars_per_book:
            corpus = slice_corpus(work, args.chars_per_book)
        config = index_config(work, args.preset)
        assert cli(["index", str(corpus), "--out", str(index), *config]) == 0
    questions = DATA / "ultradomain_cs_dev.jsonl"
    with ExitStack() as stack:
        if args.llm_backend == "llama":
            from graphrag_engine.models.llama_server import LlamaServer

            # SmolLM2's trained context (8,192), not the server's 2,048 default: answer prompts
            # with LightRAG-style contexts run past 2,048 tokens
            server = stack.enter_context(
                LlamaServer(n_threads=1, n_ctx=8192, log=work / "llama-server.log")
            )
            flags = server.query_flags()
            judged_by = ("openai", server.alias, server.url)
        elif args.llm_backend == "openai":
            if not (args.base_url and args.llm_model):
                raise SystemExit("--llm-backend openai needs --base-url and --llm-model")
            flags = ["--llm-backend", "openai", "--llm-model", args.llm_model]
            flags += ["--base-url", args.base_url]
            judged_by = ("openai", args.llm_model, args.base_url)
        else:
            flags = ["--llm-backend", "transformers"]
            judged_by = ("transformers", args.llm_model, args.base_url)
        backend, model, url = judged_by
        judge = judge_flags(backend, args.batch_size, model, url)
        pairs = PRESETS[args.preset]
        names = list(dict.fromkeys(n for pair in pairs for n in pair))
        for name in names:
            t0 = time.perf_counter()
            spec = answer_config(
                work, name, args.answer_tokens, args.batch_size, args.answer_window or None
            )
            q = ["query", str(index), str(questions), "--method", str(spec)]
            out = work / "runs" / name
            assert (
                cli([*q, "--limit", str(args.limit), *flags, "--label", name, "--out", str(out)])
                == 0
            )
            print(f"{name}: answered in {time.perf_counter() - t0:.0f} s")
        for a, b in pairs:
            t0 = time.perf_counter()
            report = work / "reports" / f"{a}_vs_{b}"
            runs = [str(work / "runs" / a), str(work / "runs" / b)]
            limit = ["--judge-limit", str(args.limit)]
            assert cli(["eval", *runs, "--out", str(report), "--judge", *judge, *limit]) == 0
            print(f"{a} vs {b}: judged in {time.perf_counter() - t0:.0f} s")
            text = (report / "report.md").read_text()
            start = text.find("## LLM judge")
            print(text[start:] if start >= 0 else text)
        bias, cost = bias_lines(work, pairs), cost_lines(work, names)
        print("\n".join(["", *bias, "", *cost]))
        write_result(
            "judge_ultradomain",
            {
                "preset": args.preset,
                "chars_per_book": args.chars_per_book or None,
                "bias": bias,
                "cost": cost,
            },  # fmt: skip
            tag=args.preset,
        )


if __name__ == "__main__":
    main()
