"""The Ray executor's pool of model actors: `workers` actors, each holding the build's embedder
and entity recognizer (each loaded when first asked for), alive from the executor's start to
its close. Every embedding and NER stage of a build reuses them, where a Ray Data pipeline per
stage would start a pool and load its model again: about 7 s a stage on the 2-CPU test
cluster, against well under a second of embedding for a small build.

Blocks of texts (each sized to take about BLOCK_SECONDS, at most BLOCK) go to the actor with
the fewest blocks in flight, in turn across the pool's calls (at most IN_FLIGHT each, so the
driver holds a bounded number of blocks), and come back as they finish, tagged with their
positions; through Parquet parts in `parts` when given, as in the Ray Data pipelines
(graphrag_engine/exec/ray_data.py). An actor that dies is restarted
by Ray (its models loaded again) and its blocks retried.

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
            actor = self._ray.remote(ModelActor).options(
                num_cpus=1, num_gpus=self.gpus, max_restarts=-1, max_task_retries=-1
            )  # a dead actor is restarted and the blocks it held are sent again
            self._actors = [actor.remote(*self._args) for _ in range(self.workers)]
        return self._actors

    def model_ids(self) -> tuple[str, str]:
        """Ids of the embedder and the entity recognizer (from the first actor)."""
        return tuple(self._ray.get(self._started()[0].model_ids.remote()))

    def blocks(self, kind: str, texts: list[str], block: int = BLOCK) -> Iterator[dict]:
        """What the actors return for the texts ("pos": their positions, "out": the results),
        block by block as they finish; `kind` is "embed" or "tag"."""
        answers = self._answers(kind, texts, block)
        yield from answers if self.parts is None else parts_read(answers)

    def _answers(self, kind: str, texts: list[str], block: int) -> Iterator[dict]:
        """The actors' answers to blocks of the texts, as they finish."""
        actors = self._started()
        sizer = BlockSizer(block, first=FIRST_BLOCK, workers=len(actors))
        lo = 0  # the first text not sent yet
        load = [0] * len(actors)  # blocks in flight per actor
        sent: dict[Any, tuple[int, int]] = {}  # answer ref -> (its actor, its texts)

        def send() -> None:
            nonlocal lo
            while lo < len(texts) and min(load) < IN_FLIGHT:
                in_turn = [(self._turn + k) % len(actors) for k in range(len(actors))]
                i = min(in_turn, key=load.__getitem__)  # the first of the least loaded
                hi = min(lo + sizer.size(), len(texts))
                batch = {
                    "pos": np.arange(lo, hi),
                    "text": np.array(texts[lo:hi], dtype=object),
                }
                sent[getattr(actors[i], kind).remote(batch)] = (i, hi - lo)
                self._turn, lo = i + 1, hi
                load[i] += 1

        send()
        while sent:
            [ref], _ = self._ray.wait(list(sent), num_returns=1)
            actor, count = sent.pop(ref)
            load[actor] -= 1
            sizer.finished(count)
            send()
            yield self._ray.get(ref)

    def release(self) -> None:
        """End the actors (their CPUs and GPUs go back to the cluster); the next block starts
        them again."""
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors = []
