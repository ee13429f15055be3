"""The Ray executor's pool of model actors: `workers` actors, each holding the build's embedder
and entity recognizer (each loaded when first asked for), alive from the executor's start to
its close. Every embedding and NER stage of a build reuses them, where a Ray Data pipeline per
stage would start a pool and load its model again: about 7 s a stage on the 2-CPU test
cluster, against well under a second of embedding for a small build.

Blocks of texts (each sized to take about BLOCK_SECONDS, at most BLOCK) go to the actor with
the fewest blocks in flight, in turn across the pool's calls (at most IN_FLIGHT each, so the
driver holds a bounded number of blocks), and come back as they finish, tagged with their
positions; through Parquet parts in `parts` when given, as in the Ray Data pipelines
(graphrag_engine/exec/ray_data.py). An actor that dies (its process, or its node) is not
restarted by Ray: its blocks go to the others, and a new actor starts where the cluster has
room for one (graphrag_engine/exec/ray_loss.py).

The pool holds `workers` CPUs (and GPUs) while it lives, so an LLM stage, whose Ray Data pool
needs them, releases it first (`release`); the next model stage starts it again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from graphrag_engine.exec.ray_data import (
    BLOCK,
    EmbedBlocks,
    TagBlocks,
    parts_read,
    quiet_actor,
    written_as_part,
)
from graphrag_engine.exec.ray_loss import replace_lost
from graphrag_engine.progress import BlockSizer

IN_FLIGHT = 2
"""Blocks sent to one actor before its first answer (so it never waits for the driver)."""
FIRST_BLOCK = 64
"""Texts of each actor's first blocks; later ones are sized by the measured rate (BlockSizer)."""


class ModelActor:
    """Ray actor of the pool: the embedder and the entity recognizer of a build, each loaded on
    its first block; the vectors or mentions of a block of texts (a Parquet part's path when
    the pool has a parts folder)."""

    def __init__(self, embedder: dict, ner_backend: str, parts: str | None) -> None:
        quiet_actor()
        self.embedder, self.ner_backend = embedder, ner_backend
        self.parts = Path(parts) if parts else None
        self._models: dict[str, EmbedBlocks | TagBlocks] = {}

    def _model(self, kind: str) -> Any:
        """The model answering `kind` ("embed" or "tag") blocks, loaded on first use."""
        if kind not in self._models:
            self._models[kind] = (
                EmbedBlocks(self.embedder) if kind == "embed" else TagBlocks(self.ner_backend)
            )
        return self._models[kind]

    def model_ids(self) -> tuple[str, str]:
        """Ids of the embedder and the entity recognizer, as the index's manifest records them."""
        return self._model("embed").embedder.model_id, self._model("tag").recognizer.model_id

    def embed(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The vectors of a block of texts."""
        return self._answer("embed", batch)

    def tag(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The mentions of a block of texts (JSON)."""
        return self._answer("tag", batch)

    def _answer(self, kind: str, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = self._model(kind)(batch)
        return results if self.parts is None else written_as_part(results, self.parts)


class ModelPool:
    """`workers` ModelActors (`gpus` GPUs each, results as parts in `parts` when given),
    started on first use and kept until `release`."""

    def __init__(
        self,
        ray: Any,
        embedder: dict,
        ner_backend: str,
        workers: int,
        gpus: float,
        parts: Path | None = None,
    ) -> None:
        self._ray, self.workers, self.gpus, self.parts = ray, max(1, workers), gpus, parts
        self._args = (embedder, ner_backend, str(parts) if parts is not None else None)
        self._actors: list[Any] = []
        self._turn = 0  # the actor that comes first among the least loaded

    def _started(self) -> list[Any]:
        """The pool's actors, started now if they are not running."""
        if not self._actors:
            self._actors = [self._start() for _ in range(self.workers)]
        return self._actors

    def _start(self) -> Any:
        """A new ModelActor; one that dies is not restarted by Ray (on a lost node its GPU may
        exist nowhere else): `_answers` sends its blocks to the others (see `_lost`)."""
        actor = self._ray.remote(ModelActor).options(
            num_cpus=1, num_gpus=self.gpus, max_restarts=0, max_task_retries=0
        )
        return actor.remote(*self._args)

    def model_ids(self) -> tuple[str, str]:
        """Ids of the embedder and the entity recognizer (from the first actor)."""
        return tuple(self._ray.get(self._started()[0].model_ids.remote()))

    def blocks(self, kind: str, texts: list[str], block: int = BLOCK) -> Iterator[dict]:
        """What the actors return for the texts ("pos": their positions, "out": the results),
        block by block as they finish; `kind` is "embed" or "tag"."""
        answers = self._answers(kind, texts, block)
        yield from answers if self.parts is None else parts_read(answers)

    def _answers(self, kind: str, texts: list[str], block: int) -> Iterator[dict]:
        """The actors' answers to blocks of the texts, as they finish; a block whose actor was
        lost goes to another."""
        actors = self._started()
        sizer = BlockSizer(block, first=FIRST_BLOCK, workers=len(actors))
        lo = 0  # the first text not sent yet
        again: list[tuple[int, int]] = []  # blocks of lost actors, to send again
        sent: dict[Any, tuple[Any, int, int]] = {}  # answer ref -> (its actor, its texts)

        def load(actor: Any) -> int:
            return sum(a is actor for a, _, _ in sent.values())

        def send() -> None:
            nonlocal lo
            while (again or lo < len(texts)) and min(map(load, actors)) < IN_FLIGHT:
                in_turn = [(self._turn + k) % len(actors) for k in range(len(actors))]
                i = min(in_turn, key=lambda k: load(actors[k]))  # the first of the least loaded
                if again:
                    a, b = again.pop()
                else:
                    a, b = lo, min(lo + sizer.size(), len(texts))
                    lo = b
                batch = {"pos": np.arange(a, b), "text": np.array(texts[a:b], dtype=object)}
                sent[getattr(actors[i], kind).remote(batch)] = (actors[i], a, b)
                self._turn = i + 1

        send()
        while sent:
            [ref], _ = self._ray.wait(list(sent), num_returns=1)
            actor, a, b = sent.pop(ref)
            try:
                answer = self._ray.get(ref)
            except self._ray.exceptions.RayActorError as exc:
                again.append((a, b))
                self._lost(actor, exc)
                send()
                continue
            sizer.finished(b - a)
            send()
            yield answer

    def _lost(self, actor: Any, exc: Exception) -> None:
        """Drop an actor whose process or node died (said in one line) and start a new one
        where the cluster has room for it; with none left, stop (the caches keep what was
        done, and the same command resumes)."""
        replace_lost(self._ray, self._actors, actor, self._start, self.gpus, "model", exc)
        self._turn = 0

    def release(self) -> None:
        """End the actors (their CPUs and GPUs go back to the cluster); the next block starts
        them again."""
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors = []
