"""The commands that ask questions and evaluate: generate, query, ask, demo, methods, compare, eval."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from graphrag_engine.cli.args import cutoffs, writable_folder
from graphrag_engine.config import LLMConfig, load_config
from graphrag_engine.errors import (
    BadInputError,
    NotYetAvailableError,
)


def cmd_generate(args: argparse.Namespace) -> int:
    """Answer a JSONL file of prompts with the configured LLM in one batched call per stage."""
    from graphrag_engine.models import GenParams, make_llm
    from graphrag_engine.models.prompts_io import read_prompts, write_answers

    config = load_config(args.config)
    llm_cfg = config.models.llm
    for key in ("backend", "model", "base_url"):
        value = getattr(args, key)
        if value is not None:
            setattr(llm_cfg, key, value)
    ids, prompts = read_prompts(args.prompts)
    cache = Path(args.out).with_suffix(".cache.sqlite") if args.out else None
    llm = make_llm(llm_cfg, default_cache=cache, dry_run=args.dry_run)
    params = GenParams(max_tokens=args.max_tokens, temperature=args.temperature)
    if args.dry_run:
        from graphrag_engine.models.forecast import StageForecast, calibrator, forecast_lines, price

        est = llm.estimate(prompts, params)
        row = StageForecast(
            args.stage, est["prompts"], est["prompt_tokens"], est["max_completion_tokens"],
            f"prompts counted; completions: --max-tokens {args.max_tokens} (an upper bound)",
            model=llm.model_id,
        )  # fmt: skip
        row.cost = price(llm_cfg, row.prompt_tokens, row.completion_tokens)
        measure = calibrator(llm_cfg, args.calibrate)
        print("\n".join(forecast_lines([row.as_dict()], "generate", "nothing was sent", measure)))
        return 0
    if not args.out:
        raise BadInputError("generate: give --out FILE for the answers (or --dry-run)")
    completions = llm.generate(prompts, params, stage=args.stage)
    write_answers(args.out, ids, completions)
    total = llm.ledger.total()
    print(
        f"{len(completions)} answers -> {args.out}: {total.calls} model calls, {total.cached_calls} cached, "
        f"{total.prompt_tokens + total.cached_prompt_tokens} prompt + "
        f"{total.completion_tokens + total.cached_completion_tokens} completion tokens, "
        f"{total.parse_failures} parse failures, {total.seconds:.1f} s"
    )
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    """Run one or several methods over a question file against an index; results land in
    --out (with several methods, one run folder per method under it)."""
    from graphrag_engine.models.base import outcome_lines
    from graphrag_engine.query.forecast import query_forecast_lines

    overrides = _query_overrides(args)
    engine = _checked_engine(args.index, args.method, overrides)
    if not args.dry_run:
        writable_folder(args.out)
    ray = None
    if args.executor == "ray":
        from graphrag_engine.api import RayPlacement

        if args.workers < 1:
            raise BadInputError(f"query --workers: give at least 1, got {args.workers}")
        if args.gpus_per_worker is not None and args.gpus_per_worker < 0:
            raise BadInputError(
                f"query --gpus-per-worker: give 0 or more, got {args.gpus_per_worker}"
            )
        ray = RayPlacement(args.address or "local", args.workers, args.gpus_per_worker)
    labels = args.label or []
    if len(args.method) == 1 and len(labels) > 1:
        raise BadInputError(f"--label: one run takes one label, got {len(labels)}")
    common = dict(limit=args.limit, dry_run=args.dry_run, fail_fast=args.fail_fast, ray=ray)
    if len(args.method) > 1:
        runs = engine.run_many(
            args.method, args.questions, args.out, labels=labels or None,
            answers_together=args.answers_together, **common, **overrides,
        )  # fmt: skip
    else:
        label = labels[0] if labels else None
        runs = engine.run(
            args.method[0], args.questions, args.out, label=label, **common, **overrides
        )
    failed = 0
    done = list(runs.values()) if isinstance(runs, dict) else [runs]
    for method, r in zip(args.method, done, strict=True):
        summary = r.summary
        if args.dry_run:
            cfg = engine.config(method, **overrides)
            print("\n".join(query_forecast_lines(r.label, summary, cfg, args.calibrate)))
            continue
        tok = summary["query_tokens_per_question"]
        print(
            f"{r.label}: {summary['questions']} questions -> {r.folder} in "
            f"{summary['seconds']:.1f} s ({summary['questions_per_s']} q/s, "
            f"{summary['resumed_questions']} resumed); tokens per question "
            f"{json.dumps(tok) if tok else 0}; stage seconds {json.dumps(summary['stage_seconds'])}"
        )
        failed += summary["failed_questions"]
        for line in outcome_lines(summary["llm"]):
            print(line, file=sys.stderr)
    if failed:
        print(
            f"{failed} questions have no answer: their prompt failed after every retry "
            "(column answer_failed of the results); re-run the same command to ask them again",
            file=sys.stderr,
        )
        return 3
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    """Answer one question typed on the command line with each --method."""
    from graphrag_engine.cli.ask import run_ask

    if args.out:
        writable_folder(args.out)
    return run_ask(args)


def cmd_demo(args: argparse.Namespace) -> int:
    """Index the demo corpus and compare every method that can run on it, with a report."""
    from graphrag_engine.cli.demo import check_demo_args, run_demo

    check_demo_args(args.questions, args.methods)  # before --out is made or an index built
    writable_folder(args.out)
    run_demo(
        args.out,
        questions=args.questions,
        answers=not args.no_answers,
        methods=args.methods,
        together=not args.answers_apart,
    )
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    """One line per registered method: its name, its paper and what its index must hold."""
    from graphrag_engine.methods import METHODS
    from graphrag_engine.methods.needs import describe

    width = max(len(n) for n in METHODS)
    for name, spec in METHODS.items():
        print(f"{name:<{width}}  {spec.paper}; {describe(spec)}")
    return 0


def _query_overrides(args: argparse.Namespace) -> dict:
    """The config overrides `query` and `compare` take from their flags."""
    return {
        "retrieval_only": args.retrieval_only,
        "llm_backend": args.llm_backend,
        "llm_model": args.llm_model,
        "base_url": args.base_url,
        "batch_size": args.batch_size,
    }


def _checked_engine(index: str, methods: list[str], overrides: dict):
    """An Engine on `index` with every method's config checked before anything is read or
    written."""
    from graphrag_engine.api import Engine

    engine = Engine(index)
    for method in methods:
        engine.config(method, **overrides)
    return engine


def cmd_compare(args: argparse.Namespace) -> int:
    """Run several methods over one question file and evaluate them into one report."""

    if len(args.method) < 2:
        raise BadInputError("compare: give two or more --method (one method is `query`)")
    overrides = _query_overrides(args)
    engine = _checked_engine(args.index, args.method, overrides)
    writable_folder(args.out)
    runs, report = engine.compare(
        args.method, args.questions, args.out, cutoffs(args.k), limit=args.limit,
        labels=args.label, fail_fast=args.fail_fast, answers_together=args.answers_together,
        **overrides,
    )  # fmt: skip
    print(report.read_text())
    for label, r in runs.items():
        print(f"{label}: {r.summary['questions']} questions -> {r.folder}", file=sys.stderr)
    print(f"report: {report}", file=sys.stderr)
    return 3 if any(r.summary["failed_questions"] for r in runs.values()) else 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Score query runs (or compare two) and write a report folder."""
    ks = cutoffs(args.k)
    if args.dry_run:
        return _eval_forecast(args)
    fresh = not Path(args.out).exists()
    writable_folder(args.out)
    try:
        return _eval(args, ks)
    except BaseException:
        if fresh and Path(args.out).is_dir() and not any(Path(args.out).iterdir()):
            Path(args.out).rmdir()  # a refused eval leaves no empty report folder behind
        raise


def _eval(args: argparse.Namespace, ks: list[int]) -> int:
    """cmd_eval's work once its report folder exists."""
    from graphrag_engine.eval.compare import compare_runs
    from graphrag_engine.eval.report import evaluate_runs, write_staged

    if args.compare:
        if len(args.runs) != 2:
            raise BadInputError("eval --compare: give exactly two run folders (RUN_A RUN_B)")
        path = write_staged(Path(args.out), lambda staging: compare_runs(*args.runs, staging, ks))
        print(path.read_text())
        return 0
    judge = None
    if args.judge or args.ragas:
        from graphrag_engine.models import make_llm

        judge = make_llm(_judge_config(args), default_cache=Path(args.out) / "judge_cache.sqlite")
    path = write_staged(
        Path(args.out),
        lambda staging: evaluate_runs(
            args.runs,
            staging,
            ks,
            judge_llm=judge,
            pairwise=args.judge,
            ragas=args.ragas,
            judge_limit=args.judge_limit,
            judge_max_tokens=args.judge_max_tokens,
        ),
    )
    print(path.read_text())
    if judge is not None:
        from graphrag_engine.models.base import outcome_lines

        for line in outcome_lines(judge.ledger.summary()):
            print(line, file=sys.stderr)
    return 0


def _judge_config(args: argparse.Namespace):
    """The judge model's LLM config from eval's flags."""

    llm_cfg = LLMConfig(backend=args.judge_backend, model=args.judge_model)
    if args.judge_batch_size:
        llm_cfg.batch_size = args.judge_batch_size
    if args.base_url:
        llm_cfg.base_url = args.base_url
    return llm_cfg


def _eval_forecast(args: argparse.Namespace) -> int:
    """`eval --dry-run`: the judge stages' forecast; nothing is sent or written."""
    from graphrag_engine.eval.forecast import forecast_judge
    from graphrag_engine.eval.report import load_run
    from graphrag_engine.models.forecast import calibrator, forecast_lines

    if not (args.judge or args.ragas):
        print("dry run: eval sends no LLM prompts without --judge or --ragas; nothing was written")
        return 0
    loaded = [load_run(r) for r in args.runs]
    judge_cfg = _judge_config(args)
    rows = forecast_judge(
        loaded, judge_cfg, Path(args.out) / "judge_cache.sqlite",
        pairwise=args.judge, ragas=args.ragas, limit=args.judge_limit,
        max_tokens=args.judge_max_tokens,
    )  # fmt: skip
    print(f"dry run: {len(loaded)} runs, {sum(len(r) for _, _, r in loaded)} result rows")
    lines = forecast_lines(
        [r.as_dict() for r in rows], "the judge", "nothing was sent or written",
        calibrator(judge_cfg, args.calibrate),
    )  # fmt: skip
    print("\n".join(lines))
    return 0


def cmd_bench_hint(args: argparse.Namespace) -> int:
    raise NotYetAvailableError(
        "`bench` has no subcommand: the benchmarks are the package bench/ of the repository, run "
        "as `python -m bench.<name>` (e.g. `python -m bench.kernels`); each prints its table, "
        "keeps its figures in bench/results/ and `python -m bench.tables` writes docs/benchmarks/"
    )
