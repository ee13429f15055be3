"""The commands that write or read an index: index, reindex, info, export, import."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from graphrag_engine.cli.args import output_folder, writable_folder
from graphrag_engine.config import LLMConfig, load_config
from graphrag_engine.errors import (
    BadInputError,
)


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

    started = time.perf_counter()
    with output_folder(args.out):
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
