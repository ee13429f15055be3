"""Several runs' answers in one batched LLM call: retrieve every run first, then answer all.

A run answers its questions batch by batch, so a comparison of many methods over a few
questions sends many small answer calls; on a CPU a model decodes a pass of 8 prompts in
about the time of a pass of 3, so most of that time is lost. `prepare` retrieves every
unfinished batch of a run (each batch checkpointed as a killed run leaves it) and returns the
answer prompts it will send; `answer_together` sends the prompts of every run in one call per
model and parameters, and files each answer in its run's response cache, with the LLM usage
and the run's share of the call's seconds (in proportion to its tokens) in its answer stage.
Each run then goes on as a resumed run does: its retrieval reloaded, its answers read from the
cache, the rows it gives when it answers alone (tests/integration/test_api.py compares them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrag_engine.config.query import QueryConfig
from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods import method_spec
from graphrag_engine.models.base import Completion, GenParams, UsageLedger, prompt_key
from graphrag_engine.models.llm import LLM
from graphrag_engine.progress import move_bar, progress
from graphrag_engine.query.heap import SettledHeap
from graphrag_engine.query.run import (
    batch_answer_ask,
    retrieve_batch,
    run_folder,
    with_answer_style,
)
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store.index_store import Index
from graphrag_engine.store.run_folder import read_json, write_atomic
from graphrag_engine.store.run_parts import add_batch_seconds, batch_done, part_path, sum_usage


@dataclass
class Pending:
    """The answer prompts of one retrieved, unanswered batch of a run."""

    out: Path
    batch: int
    prompts: list[Any]
    params: GenParams
    llm: LLM
    """The run's LLM front: its backend answers, its response cache files the answers."""


@dataclass
class TogetherCall:
    """One call that answered several runs: its prompts, runs and seconds."""

    prompts: int
    runs: int
    seconds: float
    model: str
    seconds_by_run: dict[str, float] = field(default_factory=dict)
    """Each run folder's share of `seconds`."""


def prepare(
    index: Index,
    questions: Sequence[Question],
    cfg: QueryConfig,
    out: str | Path,
    questions_src: str,
    llm_backend=None,
) -> list[Pending]:
    """Retrieve every unfinished batch of the run `cfg` -> `out` (checkpointed, its seconds
    counted in the run) and return the answer prompts of each; none when it does not
    answer."""
    out = Path(out)
    cfg = with_answer_style(cfg, questions)
    if not cfg.generation.enabled:
        return []
    pending: list[Pending] = []
    with run_folder(index, cfg, out, questions_src, questions):
        ctx = QueryContext(index, cfg, out, llm_backend=llm_backend)
        spec = method_spec(cfg.method)
        bs = cfg.batch_size
        bar = progress(f"retrieve {cfg.method}", total=len(questions), unit="q")
        with SettledHeap() as heap:
            for b in range(0, (len(questions) + bs - 1) // bs):
                batch = questions[b * bs : (b + 1) * bs]
                if not batch_done(out, b):
                    started = time.perf_counter()

                    def retrieved(n: int, base: int = b * bs) -> None:
                        move_bar(bar, base + n)

                    r, _ = retrieve_batch(ctx, spec.retrieve, b, batch, StageClock(), retrieved)
                    ask = batch_answer_ask(ctx, spec, batch, r)
                    add_batch_seconds(out, b, time.perf_counter() - started)
                    if ask.prompts:
                        pending.append(Pending(out, b, ask.prompts, ask.params, ctx.llm))
                    heap.settle()
                move_bar(bar, b * bs + len(batch))
        bar.close()
    return pending


def answer_together(pending: list[Pending], stage: str = "answer") -> list[TogetherCall]:
    """Answer every pending batch: one call per model and generation parameters, each answer
    filed in its run's cache (a failed prompt is not: its run asks it again), each batch's
    usage and share of the seconds added to its checkpoint, as the first try of a resumed
    run leaves them."""
    groups: dict[tuple[str, str], list[Pending]] = {}
    for p in pending:
        groups.setdefault((p.llm.cache_id, p.params.key()), []).append(p)
    calls = []
    for (cache_id, _), group in groups.items():
        first = group[0]
        front = LLM(first.llm.backend, cache=None, ledger=UsageLedger())
        prompts = [prompt for p in group for prompt in p.prompts]
        started = time.perf_counter()
        done = front.generate(prompts, first.params, stage, keep_failures=True)
        seconds = time.perf_counter() - started
        total = sum(c.prompt_tokens + c.completion_tokens for c in done) or 1
        call = TogetherCall(len(prompts), len({p.out for p in group}), seconds, front.model_id)
        start = 0
        for p in group:
            mine = done[start : start + len(p.prompts)]
            start += len(p.prompts)
            share = seconds * sum(c.prompt_tokens + c.completion_tokens for c in mine) / total
            _file(p, cache_id, mine, share, stage)
            key = str(p.out)
            call.seconds_by_run[key] = call.seconds_by_run.get(key, 0.0) + share
        calls.append(call)
    return calls


def _file(p: Pending, cache_id: str, done: list[Completion], seconds: float, stage: str) -> None:
    """A batch's answers into its run's cache, their usage into its retrieval checkpoint's
    usage, `seconds` into its seconds."""
    ok = [
        (prompt_key(cache_id, prompt, p.params), c)
        for prompt, c in zip(p.prompts, done, strict=True)
        if c.error is None
    ]
    if p.llm.cache is not None:
        p.llm.cache.put_many(p.llm.model_id, ok)
    ledger = UsageLedger()
    usage = ledger.get(stage, p.llm.backend.model_id)
    for c in done:
        usage.add(c)
    usage.failed_prompts += sum(c.error is not None for c in done)
    usage.seconds += seconds
    ckpt_usage = part_path(p.out, p.batch, ".retrieved.usage.json")
    carried = read_json(ckpt_usage) if ckpt_usage.exists() else {}
    write_atomic(ckpt_usage, json.dumps(sum_usage(carried, ledger.summary())).encode())
    ckpt = part_path(p.out, p.batch, ".retrieved.json")
    retrieved = read_json(ckpt)  # the stage seconds the run's rows report: answers' share too
    retrieved["seconds"][stage] = retrieved["seconds"].get(stage, 0.0) + seconds
    write_atomic(ckpt, json.dumps(retrieved).encode())
    add_batch_seconds(p.out, p.batch, seconds)
