"""A query run sharded over a Ray cluster by question batch.

Each actor opens the index and loads the method's models once, then answers whole batches
(retrieval and answers, exactly `run_batch` of a local run). The driver hands out batches as
actors free up and writes every batch that comes back as the run folder's part, so the folder
is the one a local run writes (same parts, results, summary), a job killed at any point resumes
where it stopped (in either mode), and batches already written are never asked again. An actor
that dies is restarted by Ray and its batch retried. Actors read the index and share the run
folder's LLM cache, so on a multi-node cluster both sit on shared storage. For a method that
searches vectors, the questions are embedded first by a Ray Data pipeline over a pool of
embedders (graphrag_engine/exec/ray_data.py), and each batch travels with its questions' vectors.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphrag_engine.config.query import QueryConfig
from graphrag_engine.eval.datasets import Question
from graphrag_engine.exec.ray_data import embed_texts, quiet_actor
from graphrag_engine.exec.ray_executor import actor_device, ray_session, warn_missing_gpus
from graphrag_engine.exec.ray_loss import replace_lost
from graphrag_engine.methods import method_spec
from graphrag_engine.methods.needs import VECTOR_PARTS, method_parts
from graphrag_engine.progress import progress
from graphrag_engine.query.heap import SettledHeap
from graphrag_engine.query.run import (
    finish_run,
    run_batch,
    run_folder,
    warn_gold,
    with_answer_style,
)
from graphrag_engine.retrieve.context import embedder_config
from graphrag_engine.store.index_store import Index, NoIndex
from graphrag_engine.store.run_parts import add_batch_seconds, batch_done, write_part

log = logging.getLogger(__name__)

PIPELINE_MIN_QUESTIONS = 5000
"""From this many questions on, a method that searches vectors gets its questions embedded by a
Ray Data pipeline before the query actors start. Below it the actors embed their own batches:
the pipeline's start-up (an actor pool that loads the embedder, then gives the CPUs back) cost
10 to 20 s per run on the 2-CPU test cluster (the two sharded 30-question runs of
tests/test_ray_query.py took 43 s with it, 20 s without), more than the embedding it moves."""

IN_FLIGHT = 2
"""Batches queued per actor, so an actor never waits for the driver between batches."""


def _in_actor(cfg: QueryConfig) -> QueryConfig:
    """The config as an actor sees it: Ray numbers an actor's GPUs from 0."""
    cfg = copy.deepcopy(cfg)
    for model in (cfg.models.embedder, cfg.models.llm, cfg.models.reranker):
        model.device = actor_device(model.device)
    return cfg


def _worker_class():
    import ray  # ray is an optional extra

    @ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3)
    class QueryWorker:
        """Holds the index and the method's models; answers whole batches."""

        def __init__(self, index_root: str, cfg: QueryConfig, out: str) -> None:
            quiet_actor()
            from graphrag_engine.retrieve.context import QueryContext  # in the actor process
            from graphrag_engine.store import open_index  # in the actor process

            index = NoIndex() if index_root == "none" else open_index(index_root)
            self.ctx = QueryContext(index, _in_actor(cfg), Path(out))
            self.spec = method_spec(cfg.method)
            self.heap = SettledHeap()  # frozen after the first batch, for the actor's life

        def pid(self) -> int:
            return os.getpid()

        def answer(self, b: int, batch: list[Question], fail_fast: bool, vectors=None):
            if vectors is not None:  # (question vectors, model id) from the pipeline
                self.ctx.preset_query_vectors([q.question for q in batch], *vectors)
            answered = run_batch(self.ctx, self.spec, b, batch, fail_fast)
            self.heap.settle()
            return (b, *answered)

    return QueryWorker


def run_query_on_ray(
    index: Index,
    questions: Sequence[Question],
    cfg: QueryConfig,
    out: str | Path,
    questions_src: str,
    address: str = "local",
    workers: int = 2,
    gpus_per_worker: float | None = None,
    fail_fast: bool = False,
    on_start=None,
    question_pipeline: bool | None = None,
) -> dict[str, Any]:
    """Run `cfg.method` over `questions` into `out` on `workers` Ray actors; returns the
    summary. `on_start(actors)` is called once the actors exist (fault-injection tests);
    `question_pipeline` forces the question pipeline on or off (None: PIPELINE_MIN_QUESTIONS)."""
    out = Path(out)
    cfg = with_answer_style(cfg, questions)
    with run_folder(index, cfg, out, questions_src, questions):
        gold_share = warn_gold(index, questions)
        bs = cfg.batch_size
        n_batches = (len(questions) + bs - 1) // bs
        if n_batches < workers:
            log.warning(
                f"warning: {len(questions)} questions in batches of {bs} make {n_batches} "
                f"batch(es) for {workers} Ray workers, so some stay idle; give --batch-size "
                f"{max(1, -(-len(questions) // workers))} or less to use them all",
            )
        todo = deque(b for b in range(n_batches) if not batch_done(out, b))
        resumed = len(questions) - sum(min(bs, len(questions) - b * bs) for b in todo)
        started = time.perf_counter()
        batches_here = list(todo)
        with ray_session(address, workers) as ray:
            if question_pipeline is None:
                question_pipeline = len(questions) >= PIPELINE_MIN_QUESTIONS
            _answer_on_actors(
                ray, index, questions, cfg, out, todo, resumed, workers, gpus_per_worker,
                fail_fast, on_start, question_pipeline,
            )  # fmt: skip
        seconds = time.perf_counter() - started
        for b in batches_here:  # actors run batches at once: each gets its share of the wall
            add_batch_seconds(out, b, seconds / len(batches_here))
        return finish_run(out, index, cfg, n_batches, seconds, resumed, gold_share)


def _answer_on_actors(
    ray, index: Index, questions: Sequence[Question], cfg: QueryConfig, out: Path, todo: deque,
    resumed: int, workers: int, gpus_per_worker: float | None, fail_fast: bool, on_start,
    question_pipeline: bool,
) -> None:  # fmt: skip
    """Hand the batches in `todo` to `workers` actors as they free up, write each part (with
    the LLM usage that produced it) as it returns."""
    gpus = cfg.models.gpus_needed() if gpus_per_worker is None else gpus_per_worker
    warn_missing_gpus(ray, gpus)
    vectors = (
        _question_vectors(index, questions, cfg, todo, workers, gpus) if question_pipeline else None
    )
    # a lost worker is not restarted by Ray (on a lost node its GPU may exist nowhere else):
    # the driver hands its batches to the others and starts a new worker where one fits
    worker = _worker_class().options(num_gpus=gpus, max_restarts=0, max_task_retries=0)
    # absolute paths: an actor's working folder is its node's, not the driver's
    root = "none" if isinstance(index, NoIndex) else str(Path(index.root).resolve())

    def start_worker():
        return worker.remote(root, cfg, str(out.resolve()))

    actors = [start_worker() for _ in range(workers)]
    bs = cfg.batch_size
    in_flight: dict[Any, tuple[Any, int]] = {}  # task -> (its actor, its batch)
    try:
        if on_start is not None:
            on_start(actors)
        bar = progress(f"query {cfg.method} on ray", total=len(questions), unit="q")
        bar.update(resumed)

        def fill() -> None:  # every worker up to IN_FLIGHT batches
            for actor in actors:
                while todo and sum(a is actor for a, _ in in_flight.values()) < IN_FLIGHT:
                    b = todo.popleft()
                    batch = questions[b * bs : (b + 1) * bs]
                    given = (
                        None if vectors is None else (vectors[0][b * bs : (b + 1) * bs], vectors[1])
                    )
                    in_flight[actor.answer.remote(b, batch, fail_fast, given)] = (actor, b)

        fill()
        while in_flight:
            (ref,), _ = ray.wait(list(in_flight), num_returns=1)
            actor, b = in_flight.pop(ref)
            try:
                b, rows, usage = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                todo.appendleft(b)  # the batch goes to another worker
                replace_lost(ray, actors, actor, start_worker, gpus, "query", exc)
                fill()
                continue
            write_part(out, b, rows, usage)
            bar.update(len(rows))
            fill()
        bar.close()
    finally:
        for a in actors:
            ray.kill(a)


def _question_vectors(
    index: Index, questions: Sequence[Question], cfg: QueryConfig, todo: deque, workers: int,
    gpus: float,
) -> tuple[np.ndarray, str] | None:  # fmt: skip
    """Every question's vector (rows in question order; zeros for batches already written) and
    the embedder's id, from one Ray Data pipeline over `workers` embedders, when the method
    searches vectors (its `needs` says so); None otherwise. The actors then take the questions'
    vectors from there and load an embedder only for the texts a method derives."""
    if isinstance(index, NoIndex) or not (
        method_parts(method_spec(cfg.method), cfg.options) & VECTOR_PARTS
    ):
        return None
    bs = cfg.batch_size
    rows = [i for b in todo for i in range(b * bs, min((b + 1) * bs, len(questions)))]
    embedder = dataclasses.asdict(embedder_config(cfg, index))
    asked = [q.question for b in todo for q in questions[b * bs : (b + 1) * bs]]
    found, model_id = embed_texts(embedder, asked, workers, gpus, "questions", queries=True)
    vectors = np.zeros((len(questions), found.shape[1] if rows else 0), np.float32)
    vectors[rows] = found
    return vectors, model_id
