"""`graphrag-engine query`: run one method over a question set, batch by batch, resumably.

The run folder (its identity, lock, batch parts and LLM usage) is kept by
`graphrag_engine/store/run_folder.py` and `run_parts.py`; this module is the loop that fills it.

A run killed at any point and started again skips finished batches, reloads the retrieval
checkpoint of an unfinished one, and sends only the LLM prompts that are not in the cache.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from graphrag_engine.config.query import QueryConfig
from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods import method_spec, query_config
from graphrag_engine.methods.base import MethodSpec
from graphrag_engine.progress import move_bar, progress
from graphrag_engine.query.heap import SettledHeap
from graphrag_engine.retrieve.answer import (
    AnswerAsk,
    answer_ask,
    answer_style,
    keeps_whole,
    prompt_for,
    send_ask,
)
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.ranking import passages_of
from graphrag_engine.retrieve.types import Context, Retrieved, StageClock
from graphrag_engine.store.index_store import Index
from graphrag_engine.store.run_folder import claim_run_folder, read_json, run_identity, write_atomic
from graphrag_engine.store.run_parts import (
    batch_done,
    merge_parts,
    part_path,
    run_usage,
    spent_seconds,
    sum_usage,
    usage_since,
    write_part,
)

log = logging.getLogger(__name__)

GOLD_WARN_SHARE = 0.5
"""`query` warns when fewer of the questions' gold passages than this share are in the index."""


def warn_gold(index: Index, questions: Sequence[Question]) -> float | None:
    """The share of gold passages in the index, with a warning on stderr when it is low."""
    gold_share = gold_in_index(index, questions)
    if gold_share is not None and gold_share < GOLD_WARN_SHARE:
        log.warning(
            f"warning: only {gold_share:.0%} of the questions' gold passages are in the index "
            f"{index.root}: recall will be low whatever the method; were these questions "
            "meant for another corpus?",
        )
    return gold_share


def gold_in_index(index: Index, questions: Sequence[Question]) -> float | None:
    """The share of the questions' gold passage ids that are documents of the index (None
    when the questions name no gold passages or there is no index)."""
    if index.root == Path("none"):
        return None
    held: set[str] | None = None  # read when the first gold passage comes
    named = found = 0
    for q in questions:
        for pid in q.supporting_ids or []:
            if held is None:
                docs = index.table("documents", columns=["doc_id", "external_id"]).to_pydict()
                pairs = zip(docs["doc_id"], docs["external_id"], strict=True)
                held = {ext or doc for doc, ext in pairs}
            named += 1
            found += pid in held
    return found / named if named else None


def _chunk_contexts(ctx: QueryContext, r: Retrieved, n: int) -> list[list[int]]:
    """Chunk rows of each question's context: the ranking's top_k (none without a ranking)."""
    top_k = ctx.cfg.retrieval.top_k
    return [[] if r.ranking is None else r.ranking.row(q)[0][:top_k] for q in range(n)]


def batch_contexts(ctx: QueryContext, r: Retrieved, n: int) -> list[Context | None]:
    """Each question's context before fitting: the method's own, else its ranking's top_k
    chunks (None: no retrieval)."""
    if r.contexts is not None:
        return list(r.contexts)
    if r.ranking is not None:
        titled = ctx.chunks["titled"]
        return [Context.of([titled[i] for i in rows]) for rows in _chunk_contexts(ctx, r, n)]
    return [None] * n


def batch_answer_ask(
    ctx: QueryContext, spec: MethodSpec, batch: list[Question], r: Retrieved
) -> AnswerAsk:
    """The answer prompts of a retrieved batch (in `spec`'s answer prompt): what
    `_answer_batch` sends, alone or together."""
    cfg = ctx.cfg
    return answer_ask(
        ctx.count_tokens,
        [q.question for q in batch],
        batch_contexts(ctx, r, len(batch)),
        ctx.context_tokens,
        cfg.generation.max_tokens,
        prompt_for(spec, cfg.generation.answer_style),
        cfg.options,
    )


def _answer_batch(
    ctx: QueryContext,
    spec: MethodSpec,
    batch: list[Question],
    r: Retrieved,
    clock: StageClock,
    fail_fast: bool,
    on_answer: Callable[[float], None] | None = None,
) -> list[dict[str, Any]]:
    """Answers and result rows of one retrieved batch."""
    cfg = ctx.cfg
    chunks = ctx.chunks if r.ranking is not None else None
    rows_of = _chunk_contexts(ctx, r, len(batch))
    contexts = batch_contexts(ctx, r, len(batch)) if not cfg.generation.enabled else []
    answers: list[str | None] = [None] * len(batch)
    ans_tokens: list[dict[str, int]] = [{} for _ in batch]
    failed: list[str | None] = [None] * len(batch)  # why an answer prompt failed
    if cfg.generation.enabled:
        with clock.stage("answer"):
            done = send_ask(
                ctx.llm,
                batch_answer_ask(ctx, spec, batch, r),
                keep_failures=not fail_fast,
                on_progress=on_answer,
                whole=keeps_whole(spec, cfg.generation.answer_style),
            )
        answers, ans_tokens, contexts = list(done.answers), done.tokens, done.contexts
        failed = list(done.failed)
    per_q = {k: v / len(batch) for k, v in clock.seconds.items()}
    rows = []
    for q, question in enumerate(batch):
        ranked, scores = ([], []) if r.ranking is None else r.ranking.row(q)
        shown = [] if contexts[q] is None else contexts[q].texts()
        # what the prompt really holds: the chunks that fit
        ctx_rows = rows_of[q][: len(shown)] if r.contexts is None else []
        rows.append(
            {
                "qid": question.qid,
                "question": question.question,
                "method": cfg.method,
                "answer": answers[q],
                "retrieved_ids": passages_of(ranked, chunks["passage"])[: cfg.retrieval.candidates]
                if chunks
                else [],
                "retrieved_chunk_ids": [chunks["ids"][i] for i in ranked] if chunks else [],
                "retrieved_scores": scores,
                "context_ids": [chunks["ids"][i] for i in ctx_rows] if chunks else [],
                "context_text": shown,
                "gold_answers": question.answers,
                "supporting_ids": question.supporting_ids,
                "qtype": question.qtype,
                "kind": question.kind,
                "tokens": {**r.tokens[q], **ans_tokens[q]},
                "seconds": per_q,
                "answer_failed": failed[q],
                "extras": r.extras[q],
            }
        )
    return rows


def run_query(
    index: Index,
    questions: Sequence[Question],
    cfg: QueryConfig,
    out: str | Path,
    questions_src: str,
    dry_run: bool = False,
    llm_backend=None,
    fail_fast: bool = False,
) -> dict[str, Any]:
    """Run `cfg.method` over `questions` into the run folder `out`; returns the summary.

    `llm_backend` replaces the backend the config names (e.g. a model already in memory). An
    answer prompt that fails after every retry is recorded as that question's failure and the
    run goes on (summary `failed_questions`); `fail_fast` stops the run instead."""
    out = Path(out)
    cfg = with_answer_style(cfg, questions)
    if dry_run:  # a dry run writes nothing
        return _run_batches(index, questions, cfg, out, dry_run, llm_backend, fail_fast)
    with run_folder(index, cfg, out, questions_src, questions):
        return _run_batches(index, questions, cfg, out, dry_run, llm_backend, fail_fast)


@contextmanager
def run_folder(
    index: Index, cfg: QueryConfig, out: Path, questions_src: str, questions: Sequence[Question]
) -> Iterator[None]:
    """Hold the run folder while this run writes it (see `store.run_folder.claim_run_folder`)."""
    identity = run_identity(index, cfg.method, cfg.to_dict(), questions_src, questions)
    with claim_run_folder(out, identity, index, query_config(cfg.method).to_dict()):
        yield


def _run_batches(
    index: Index, questions: Sequence[Question], cfg: QueryConfig, out: Path, dry_run: bool,
    llm_backend, fail_fast: bool,
) -> dict[str, Any]:  # fmt: skip
    """Every batch not finished yet: retrieve (or reload its checkpoint), answer, write."""
    ctx = QueryContext(index, cfg, out, dry_run=dry_run, llm_backend=llm_backend)
    gold_share = warn_gold(index, questions)
    spec = method_spec(cfg.method)
    started = time.perf_counter()
    bs = cfg.batch_size
    n_batches = (len(questions) + bs - 1) // bs
    bar = progress(f"query {cfg.method}", total=len(questions), unit="q")
    resumed = 0
    with SettledHeap() as heap:
        for b in range(n_batches):
            batch = questions[b * bs : (b + 1) * bs]
            if not dry_run and batch_done(out, b):
                resumed += len(batch)
                bar.update(len(batch))
                continue
            batch_started = time.perf_counter()
            base, size, blocks = b * bs, len(batch), []  # where retrieved blocks got to

            def retrieved(n: int, base: int = base, blocks: list = blocks) -> None:
                blocks.append(n)
                move_bar(bar, base + (n / 2 if cfg.generation.enabled else n))

            def answered(n: float, base: int = base, size: int = size, blocks=blocks) -> None:
                # the answers fill the batch's second half when its retrieval moved the first
                move_bar(bar, base + (size / 2 + n / 2 if blocks else n))

            rows, usage = run_batch(ctx, spec, b, batch, fail_fast, answered, retrieved)
            if not dry_run:
                write_part(out, b, rows, usage, time.perf_counter() - batch_started)
            move_bar(bar, base + len(batch))
            heap.settle()
    bar.close()
    if dry_run:
        return {"dry_run": True, "questions": len(questions), "llm": ctx.ledger.summary()}
    seconds = time.perf_counter() - started
    return finish_run(out, index, cfg, n_batches, seconds, resumed, gold_share, ctx)


def with_answer_style(cfg: QueryConfig, questions: Sequence[Question]) -> QueryConfig:
    """`cfg` with `generation.answer_style` resolved for this question set (auto: long for
    question kinds without short gold answers), and a long style's answer length
    (`long_max_tokens`) in `max_tokens`, so every batch and worker answers alike."""
    gen = cfg.generation
    kinds = getattr(questions, "kinds", None)  # a question file knows them without a read
    style = answer_style(gen.answer_style, list(kinds or (q.kind for q in questions)))
    tokens = gen.long_max_tokens if style == "long" else gen.max_tokens
    return dataclasses.replace(
        cfg, generation=dataclasses.replace(gen, answer_style=style, max_tokens=tokens)
    )


def run_batch(
    ctx: QueryContext,
    spec: MethodSpec,
    b: int,
    batch: list[Question],
    fail_fast: bool,
    on_answer: Callable[[float], None] | None = None,
    on_retrieved: Callable[[int], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Result rows of batch `b` by the method `spec`: retrieval (or its checkpoint in the run
    folder), then answers
    (`on_retrieved` and `on_answer` hear how many are done, for the run's bar); and the LLM
    usage that produced them, to be committed with them (a checkpoint written by a process
    that died before committing the batch brings its retrieval's usage along)."""
    clock = StageClock()
    before = ctx.ledger.summary()
    r, carried = retrieve_batch(ctx, spec.retrieve, b, batch, clock, on_retrieved)
    rows = _answer_batch(ctx, spec, batch, r, clock, fail_fast, on_answer)
    return rows, sum_usage(carried, usage_since(before, ctx.ledger.summary()))


def retrieve_batch(
    ctx: QueryContext,
    method,
    b: int,
    batch: list[Question],
    clock: StageClock,
    on_retrieved: Callable[[int], None] | None = None,
) -> tuple[Retrieved, dict[str, dict[str, Any]]]:
    """Retrieval of batch `b`, or its checkpoint; and the usage such a checkpoint carries when
    no process committed the batch yet (this process's ledger does not hold it). The
    checkpoint (the retrieval and the LLM usage it took) is written when answers follow or the
    retrieval called an LLM; an LLM-free retrieval-only batch is committed by its part file
    right after, and redone if the process dies before that."""
    ckpt = part_path(ctx.run_dir, b, ".retrieved.json")
    ckpt_usage = part_path(ctx.run_dir, b, ".retrieved.usage.json")
    if ckpt.exists() and not ctx.dry_run:
        r = Retrieved.from_json(read_json(ckpt))
        clock.seconds = dict(r.seconds)
        committed = part_path(ctx.run_dir, b, ".usage.json").exists()
        carried = read_json(ckpt_usage) if ckpt_usage.exists() and not committed else {}
        return r, carried
    before = ctx.ledger.summary()
    r = retrieve_blocks(ctx, method, batch, clock, on_retrieved)
    usage = usage_since(before, ctx.ledger.summary())
    if not ctx.dry_run and (ctx.cfg.generation.enabled or usage):
        write_atomic(ckpt_usage, json.dumps(usage).encode())
        write_atomic(ckpt, json.dumps(r.to_json()).encode())
    return r, {}


QUIET_SECONDS, BLOCK_SECONDS, FIRST_BLOCK = 8.0, 4.0, 16
"""A batch's retrieval leaves the run's bar standing still at most about QUIET_SECONDS: after
a first block of FIRST_BLOCK questions (which also loads the method's models), the rest is
one call when it takes no longer at the last block's rate, else blocks of about
BLOCK_SECONDS (at most four times the last block)."""


def retrieve_blocks(
    ctx: QueryContext,
    method,
    batch: list[Question],
    clock: StageClock,
    on_retrieved: Callable[[int], None] | None = None,
) -> Retrieved:
    """The batch's retrieval a block of questions at a time, so that `on_retrieved` (how many
    are done) moves the run's bar while a slow LLM-free method works (see QUIET_SECONDS). One
    call when nobody listens, for a dry run (a forecast), for a batch of one block, and when
    the method calls an LLM: its stages move bars of their own and batch best whole."""
    if on_retrieved is None or ctx.dry_run or ctx.cfg.method_llm_use() or len(batch) <= FIRST_BLOCK:
        return method(ctx, batch, clock)
    parts: list[Retrieved] = []
    done, size = 0, FIRST_BLOCK
    while done < len(batch):
        block = batch[done : done + size]
        started = time.perf_counter()
        parts.append(method(ctx, block, StageClock()))
        per_question = (time.perf_counter() - started) / len(block)
        done += len(block)
        on_retrieved(done)
        left = len(batch) - done
        if left * per_question <= QUIET_SECONDS:
            size = left
        else:
            size = max(1, min(int(BLOCK_SECONDS / per_question), 4 * len(block)))
    r = parts[0] if len(parts) == 1 else Retrieved.joined(parts)
    clock.seconds = dict(r.seconds)
    return r


def finish_run(
    out: Path,
    index: Index,
    cfg: QueryConfig,
    n_batches: int,
    seconds: float,
    resumed: int,
    gold_share: float | None,
    ctx: QueryContext | None = None,
) -> dict[str, Any]:
    """Merge the batch parts into results.parquet / results.jsonl and write summary.json; its
    LLM usage is the sum of every batch's, so it covers every process that worked on the run
    (one killed mid-run included, for the batches it committed)."""
    totals = merge_parts(out, n_batches)
    n = totals.questions
    total_seconds = spent_seconds(out, n_batches, seconds)
    index_tokens = sum(
        int(s.get("prompt_tokens", 0)) + int(s.get("completion_tokens", 0))
        for s in index.manifest.get("stats", {}).get("stages", {}).values()
    )
    summary = {
        "method": cfg.method,
        "questions": n,
        "seconds": round(total_seconds, 3),
        "seconds_this_process": round(seconds, 3),
        "resumed_questions": resumed,
        "failed_questions": totals.failed,
        "questions_per_s": round(n / total_seconds, 3) if total_seconds > 0 else None,
        "stage_seconds": {k: round(v, 3) for k, v in totals.seconds.items()},
        "query_tokens_per_question": {k: round(v / n, 2) for k, v in totals.tokens.items()},
        "index_tokens": index_tokens,
        "index_tokens_per_question": round(index_tokens / n, 2),
        "gold_in_index": None if gold_share is None else round(gold_share, 4),
        "answer_style": cfg.generation.answer_style,
        "context_budget": (ctx or QueryContext(index, cfg, out)).budget.as_dict(),
        "llm": run_usage(out, n_batches),
    }
    write_atomic(out / "llm_usage.json", json.dumps(summary["llm"], indent=2).encode())
    write_atomic(out / "summary.json", json.dumps(summary, indent=2).encode())
    return summary
