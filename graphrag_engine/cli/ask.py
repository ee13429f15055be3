"""`graphrag-engine ask`: one question typed on the command line, answered by each method
through the batch path (a batch of one), printed with its context, sources, tokens and seconds."""

from __future__ import annotations

import argparse
import json
import tempfile
import textwrap

from graphrag_engine.api import Engine


def run_ask(args: argparse.Namespace) -> int:
    """Answer one question typed on the command line with each --method: the answer, the
    context the prompt held, the passages it came from, and the tokens and seconds it took."""
    overrides = {
        "retrieval_only": args.retrieval_only,
        "llm_backend": args.llm_backend,
        "llm_model": args.llm_model,
        "base_url": args.base_url,
    }
    engine = Engine(args.index)
    for method in args.method:  # every config checked before anything runs
        engine.config(method, **overrides)
    if args.out:
        return _print_answers(args, engine.ask(args.question, args.method, args.out, **overrides))
    with tempfile.TemporaryDirectory(prefix="graphrag-ask-") as tmp:  # nothing left behind
        return _print_answers(args, engine.ask(args.question, args.method, tmp, **overrides))


def _print_answers(args: argparse.Namespace, runs: dict) -> int:
    """Each method's answer, context, sources, tokens and seconds for the asked question."""
    for label, run in runs.items():
        row, summary = run.rows()[0], run.summary
        print(f"== {label} ({summary['method']})")
        answer = row["answer"]
        if row["answer_failed"]:
            answer = f"(no answer: {row['answer_failed']})"
        print(f"answer: {answer if answer is not None else '(retrieval only)'}")
        for i, text in enumerate(row["context_text"], 1):
            flat = " ".join(text.split())
            print(textwrap.shorten(f"  context [{i}] {flat}", width=args.width, placeholder=" ..."))
        print(f"  sources: {', '.join(row['retrieved_ids'][:5]) or '(none)'}")
        tokens = row["tokens"]
        stages = ", ".join(f"{k} {v:.2f}" for k, v in summary["stage_seconds"].items())
        print(
            f"  tokens: {sum(tokens.values())} {json.dumps(tokens) if tokens else ''}; "
            f"seconds: {summary['seconds']:.2f} ({stages})"
        )
    return 0
