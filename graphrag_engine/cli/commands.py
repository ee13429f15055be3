"""Command line: demo | index | import | info | query | eval | export | bench (thin: parse, call, print).

Bad input prints one line on stderr and exits 2; an internal failure exits 1; a query run that
finished with questions whose answer prompt failed after every retry exits 3.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from graphrag_engine.cli.exits import run_command
from graphrag_engine.cli.logs import show_library_messages
from graphrag_engine.cli.parser import build_parser
from graphrag_engine.config import LLMConfig, load_config
from graphrag_engine.errors import (
    BadInputError,
    NotYetAvailableError,
)


def writable_folder(path: str, flag: str = "--out") -> Path:
    """`path` as an output folder that exists or can be made, and can be written to."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise BadInputError(f"{flag} {path}: is a file; give a folder path")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInputError(f"{flag} {path}: cannot create the folder ({exc.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise BadInputError(f"{flag} {path}: cannot write there (permission denied)")
    return out


def cutoffs(text: str) -> list[int]:
    """--k: comma-separated positive integers."""
    try:
        ks = [int(k) for k in text.split(",")]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1:
        raise BadInputError(f"--k {text}: give comma-separated positive integers such as 1,2,5,10")
    return ks


def _index_config(args: argparse.Namespace):
    """The index config of --config with the ingest and executor flags applied."""
    config = load_config(args.config)
    for name in ("id_field", "title_field", "text_field"):
        value = getattr(args, name)
        if value is not None:
            setattr(config.ingest, name, value)
    if args.skip_bad:
        config.ingest.skip_bad = True
    if args.strict_ids:
        config.ingest.strict_ids = True
    if args.executor:
        config.executor = args.executor
    if args.address:
        config.ray_address = args.address
    return config


def _check_corpus_and_target(corpus: list[str], out: str, command: str) -> None:
    """Some corpus is given, and the index does not lie inside a corpus folder."""
    if not corpus:
        raise BadInputError(f"{command}: give CORPUS files or folders, or --demo")
    target = Path(out).resolve()
    for source in corpus:
        folder = Path(source).resolve()
        if folder.is_dir() and target.is_relative_to(folder):
            raise BadInputError(
                f"{command} --out {out}: lies inside the corpus folder {source}, so the index "
                "would be read as corpus next time; put the index outside it"
            )


def cmd_reindex(args: argparse.Namespace) -> int:
    """Bring an index up to date with its source: only new and changed documents are
    extracted, deleted ones are removed, nothing is written when nothing changed."""
    from graphrag_engine.index.reindex import reindex
    from graphrag_engine.store.describe import stage_lines

    config = _index_config(args)
    _check_corpus_and_target(list(args.corpus), args.out, "reindex")
    writable_folder(args.out)
    started = time.perf_counter()
    done = reindex(list(args.corpus), args.out, config)
    diff = done["diff"]
    counts = ", ".join(f"{diff[k]} {k}" for k in ("new", "changed", "deleted", "unchanged"))
    manifest = done["manifest"]
    if manifest is None:
        print(f"up to date: {counts}; nothing written ({time.perf_counter() - started:.1f} s)")
        return 0
    for line in stage_lines(manifest):
        print(line)
    why = " (index config changed)" if diff["config_changed"] else ""
    if diff["first_build"]:
        counts, why = f"{manifest['stats']['ingest']['documents']} documents", " (first build)"
    print(
        f"re-indexed {args.out} (generation {manifest['generation']}): {counts}{why}; "
        f"{time.perf_counter() - started:.1f} s wall"
    )
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """Build an index from corpus files (or the built-in demo corpus)."""
    from graphrag_engine.demo import corpus_path
    from graphrag_engine.index.pipeline import build_index
    from graphrag_engine.store.describe import stage_lines, table_lines

    config = _index_config(args)
    corpus = list(args.corpus)
    if args.demo:
        corpus.append(str(corpus_path()))
    _check_corpus_and_target(corpus, args.out, "index")
    if not args.dry_run:
        writable_folder(args.out)
    if args.add and not (Path(args.out) / "manifest.json").exists():
        raise BadInputError(
            f"index --add: {args.out} holds no index yet; build one first without --add"
        )
    if args.force and args.add:
        raise BadInputError(
            "index: --force rebuilds from CORPUS alone; it cannot be used with --add"
        )
    started = time.perf_counter()
    manifest = build_index(
        corpus, args.out, config, add=args.add, dry_run=args.dry_run, force=args.force
    )
    if args.dry_run:
        _print_forecast(manifest, config.models.llm, args.calibrate)
        return 0
    wall = time.perf_counter() - started
    ingest = manifest["stats"]["ingest"]
    stages = manifest["stats"]["stages"]
    for line in table_lines(manifest) + stage_lines(manifest):
        print(line)
    if ingest.get("id_conflicts"):
        print(
            f"warning: {ingest['id_conflicts']} records reuse a corpus id that an earlier record "
            "with another text had (both kept); --strict-ids makes this an error",
            file=sys.stderr,
        )
    times = ", ".join(f"{name} {s.get('seconds', 0):.1f} s" for name, s in stages.items())
    print(
        f"indexed {ingest['documents']} documents from {ingest['files']} file(s) into {args.out} "
        f"(generation {manifest['generation']}): {stages['ingest_chunk']['chunks']} chunks, "
        f"{stages['ingest_chunk']['tokens']} tokens, {ingest['duplicates']} duplicates dropped, "
        f"{ingest['skipped_bad']} bad records skipped; {wall:.1f} s wall ({times})"
    )
    return 0


def _print_forecast(dry: dict, llm_cfg: LLMConfig, calibrate: str) -> None:
    """The index dry run's forecast: one line per LLM stage, then the total."""
    from graphrag_engine.models.forecast import calibrator, forecast_lines

    print(f"dry run: {dry['documents']} documents, {dry['chunks']} chunks, {dry['tokens']} tokens")
    lines = forecast_lines(
        dry["forecast"], "the index", "nothing was sent, embedded or written",
        calibrator(llm_cfg, calibrate),
    )  # fmt: skip
    print("\n".join(lines))


def cmd_info(args: argparse.Namespace) -> int:
    """Describe an index: tables, row counts, sizes, models, config and stage summaries."""
    from graphrag_engine.store.describe import describe_index

    print(describe_index(args.index, verify=args.verify, as_json=args.json))
    return 0


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


def cmd_export(args: argparse.Namespace) -> int:
    """Write the index's entity graph (and communities) for Gephi, Neo4j or GraphRAG tools."""
    from graphrag_engine.export.formats import export_graph
    from graphrag_engine.store import open_index

    files = export_graph(open_index(args.index), args.format, args.out, replace=args.replace)
    print(f"{args.format}: {len(files)} files -> {args.out}: " + ", ".join(f.name for f in files))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Turn another system's index into an engine index (a no-op when nothing changed)."""
    from graphrag_engine.importers import import_index
    from graphrag_engine.store.describe import table_lines

    writable_folder(args.out)
    started = time.perf_counter()
    manifest = import_index(
        args.source, args.out, load_config(args.config), args.system, args.corpus
    )
    source = manifest["stats"]["import"]
    if manifest.get("unchanged"):
        print(
            f"up to date: {args.out} already holds this {source['layout']} import; nothing written"
        )
        return 0
    for line in table_lines(manifest):
        print(line)
    counts = manifest["stats"]["stages"]["import"]
    print(
        f"imported {source['layout']} from {args.source} into {args.out} (generation "
        f"{manifest['generation']}): {counts['entities']} entities, {counts['relations']} "
        f"relations, {counts['reports']} reports; {time.perf_counter() - started:.1f} s wall"
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
    from graphrag_engine.eval.report import compare_runs, evaluate_runs, write_staged

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
    from graphrag_engine.config import LLMConfig

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


def _bench_hint(args: argparse.Namespace) -> int:
    raise NotYetAvailableError(
        "`bench` has no subcommand: the benchmarks are the package bench/ of the repository, run "
        "as `python -m bench.<name>` (e.g. `python -m bench.kernels`); each prints its table, "
        "keeps its figures in bench/results/ and `python -m bench.tables` writes docs/benchmarks/"
    )


COMMANDS = {
    "demo": cmd_demo,
    "index": cmd_index,
    "reindex": cmd_reindex,
    "info": cmd_info,
    "generate": cmd_generate,
    "query": cmd_query,
    "ask": cmd_ask,
    "export": cmd_export,
    "import": cmd_import,
    "methods": cmd_methods,
    "eval": cmd_eval,
    "compare": cmd_compare,
    "bench_hint": _bench_hint,
}
"""Each parser command's function (graphrag_engine/cli/parser.py names them)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    show_library_messages()
    return run_command(COMMANDS[args.command], args)
