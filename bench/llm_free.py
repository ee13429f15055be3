"""The methods that answer retrieval without an LLM, as the throughput benches run them, and
the loop that times one of them over a question set stage by stage.

Each entry is a registered method with the settings that keep it LLM-free (NER keys instead of
LLM keywords, no perspective expansion, the question as PankRAG's only step, LEGO on the
index's entity graph). `bench/gpu_pipeline.py` and `bench/scale.py` share them, so a method's
figures in both mean the same configuration.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from graphrag_engine.config.query import QueryConfig
from graphrag_engine.eval.datasets import Question, load_questions
from graphrag_engine.methods import method_spec, query_config
from graphrag_engine.query.heap import SettledHeap
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index

METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "bm25": ("bm25", {}),
    "naive": ("naive", {}),
    "hipporag": ("hipporag", {}),
    # the paper's path scoring (the default) embeds every candidate path's text (about 100x
    # dense's cost a question on a CPU)
    "clue": ("clue", {}),
    # paths scored by their units' stored vectors, pooled by characters or unweighted
    "clue_pooled_paths": ("clue", {"path_scoring": "pooled"}),
    "clue_mean_paths": ("clue", {"path_scoring": "mean"}),
    "lightrag_hybrid_ner": ("lightrag", {"keywords": "ner", "mode": "hybrid"}),
    "graphrag_local": ("graphrag_local", {}),
    "rograg_dual_level_ner": (
        "rograg",
        {"stages": ["dual_level"], "check": "none", "keys": "ner", "analysis": False},
    ),
    # relation vectors, not edge texts: on the train sets the same R@5, 60x the rate once entities
    # carry their sentences (bench/descriptions.py)
    "regraphrag_no_expansion": ("regraphrag", {"expansion": False, "edge_text": "relation"}),
    "pankrag_no_path": ("pankrag", {"plan": "direct", "scope": "specific"}),
    "lego_index": ("lego", {"graph": "index"}),
    "linearrag": ("linearrag", {}),
}
"""bench name: (registered method, settings of its section that keep it LLM-free)."""


def method_config(name: str, device: str, batch_size: int | None = None) -> QueryConfig:
    """The retrieval-only query config of bench method `name` with its models on `device`."""
    method, settings = METHODS[name]
    cfg = query_config(method)
    for key, value in settings.items():
        if not hasattr(cfg.options, key):
            raise KeyError(f"{method} has no setting {key!r}")
        setattr(cfg.options, key, value)
    cfg.generation.enabled = False
    cfg.models.embedder.device = device
    cfg.retrieval.device = device
    if batch_size is not None:
        cfg.batch_size = batch_size
    cfg.validate(f"bench method {name}")
    return cfg


@dataclass
class Timing:
    """One method over a question set: seconds, stage seconds, each question's ranking and
    what the method recorded of it (its extras)."""

    questions: int
    seconds: float
    stage_seconds: dict[str, float] = field(default_factory=dict)
    rankings: list[list[int]] = field(default_factory=list)
    extras: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Questions per second."""
        return self.questions / self.seconds if self.seconds > 0 else float("inf")

    def figures(self) -> dict[str, Any]:
        """The JSON figures: questions, seconds, q/s and the stage seconds."""
        return {
            "questions": self.questions,
            "seconds": round(self.seconds, 3),
            "questions_per_s": round(self.rate, 2),
            "stage_seconds": {k: round(v, 3) for k, v in sorted(self.stage_seconds.items())},
        }


def time_method(
    ctx: QueryContext,
    questions: list[Question],
    warmup: list[Question] | None = None,
    min_seconds: float = 0.0,
) -> Timing:
    """Run the context's method over `questions` in batches of its batch size, after one warm-up
    batch (models loaded, tables read, structures built, the run's objects settled for the
    collector as a query run settles them), and time it stage by stage. With `min_seconds`, the
    set is run again until that much time has passed (a method that answers 200 questions in a
    few milliseconds is timed over many rounds, not one scheduler tick); the rankings are the
    first round's."""
    retrieve = method_spec(ctx.cfg.method).retrieve
    with SettledHeap() as heap:
        retrieve(ctx, warmup or questions[:2], StageClock())
        heap.settle()
        _sync(ctx.device)
        stages: dict[str, float] = {}
        rankings: list[list[int]] = []
        extras: list[dict[str, Any]] = []
        asked = 0
        started = time.perf_counter()
        while not asked or time.perf_counter() - started < min_seconds:
            for lo in range(0, len(questions), ctx.cfg.batch_size):
                batch = questions[lo : lo + ctx.cfg.batch_size]
                got = retrieve(ctx, batch, StageClock())
                for stage, seconds in got.seconds.items():
                    stages[stage] = stages.get(stage, 0.0) + seconds
                if not asked:
                    ids = got.ranking.ids if got.ranking is not None else np.zeros((len(batch), 0))
                    rankings.extend([int(i) for i in row if i >= 0] for row in ids)
                    extras.extend(got.extras or [{} for _ in batch])
            asked += len(questions)
            _sync(ctx.device)
        return Timing(asked, time.perf_counter() - started, stages, rankings, extras)


def _sync(device: str) -> None:
    """Wait for the GPU's queued work, so that a timing holds all of it."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def agreement(a: list[list[int]], b: list[list[int]], k: int) -> dict[str, float]:
    """How alike two runs' rankings are at depth k: the mean share of the top k in common (two
    empty rankings agree fully) and the share of questions whose top k is the same list."""
    pairs = list(zip(a, b, strict=True))
    shared = [
        len(set(x[:k]) & set(y[:k])) / min(k, len(x), len(y)) if x and y else float(x == y)
        for x, y in pairs
    ]
    same = [x[:k] == y[:k] for x, y in pairs]
    n = max(1, len(shared))
    return {
        f"top{k}_overlap": round(sum(shared) / n, 4),
        f"top{k}_identical": round(sum(same) / n, 4),
    }


def batched_vs_single(
    index: Path, questions: Path, work: Path, run: str, batched: Timing | None = None
) -> dict:
    """A run over the set in batches (`batched`, when already timed) and one question at a
    time: rates, speed-up and how alike the rankings are."""
    qs = load_questions(questions)

    def timed(size: int | None) -> Timing:
        cfg = method_config(run, "cpu", batch_size=size)
        return time_method(QueryContext(open_index(index), cfg, work / "runs"), qs)

    batched = batched or timed(None)
    single = timed(1)
    return {
        "run": run,
        "batch_size": method_config(run, "cpu").batch_size,
        "batched_q_per_s": round(batched.rate, 2),
        "single_q_per_s": round(single.rate, 2),
        "speed_up": round(batched.rate / single.rate, 2),
        **agreement(batched.rankings, single.rankings, 5),
        "same_tests": [e.get("tests") for e in batched.extras]
        == [e.get("tests") for e in single.extras],
    }


def cli_rate(
    index: Path, name: str, first: Path, asked: Path, counts: tuple[int, int], work: Path
) -> tuple[float, float]:
    """Wall seconds of `graphrag-engine query --retrieval-only` running bench method `name` as
    a user starts it (a new process, a new run folder) over the question files `first` and
    `asked`, holding `counts` questions: their difference is what the questions cost beyond the
    process's fixed start (imports, models, tables)."""
    method, settings = METHODS[name]
    cfg = work / f"{name}.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(yaml.safe_dump({"method": method, **({method: settings} if settings else {})}))
    seconds = []
    for questions, n in zip((first, asked), counts, strict=True):
        out = work / f"{name}-{n}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [sys.executable, "-m", "graphrag_engine.cli", "query", str(index), str(questions)]
        cmd += ["--method", str(cfg), "--retrieval-only", "--out", str(out)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": "0"}
        started = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        seconds.append(time.perf_counter() - started)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr[-1000:]}")
    return seconds[0], seconds[1]


def marginal_rate(passes: list[tuple[float, float]], counts: tuple[int, int]) -> dict[str, Any]:
    """A method's CLI figures from its passes of `cli_rate`: the median marginal questions/s
    (None when no pass's larger run took longer) and the fixed seconds of a process start."""
    extra = counts[1] - counts[0]
    rates = [extra / (b - a) for a, b in passes if b > a]
    rate = statistics.median(rates) if rates else None
    return {
        "questions_per_s": None if rate is None else round(rate, 2),
        "passes_q_per_s": [round(r, 2) for r in rates],
        "fixed_seconds": None if rate is None else round(passes[0][0] - counts[0] / rate, 2),
        "seconds": [[round(a, 2), round(b, 2)] for a, b in passes],
    }
