"""Ray executor: texts sharded over model-holding actors (one embedder + NER per worker) on a
local or running Ray cluster; results come back in input order and merge into one index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from typing import Any

import numpy as np

from engine.config import EmbedderConfig
from engine.errors import ConfigError
from engine.exec.ray_data import (
    EmbedBlocks,
    TagBlocks,
    actor_device,
    actor_embedder,
    quiet_actor,
    stream_blocks,
)
from engine.exec.ray_llm import RayDataVLLM, ray_data_llm_available

__all__ = ["RayExecutor", "actor_device", "connect", "ray_session", "warn_missing_gpus"]


def _worker_class():
    import ray

    # a worker that dies is restarted (models loaded again) and its call retried: the other
    # shards' results stand, and the driver's caches hold every slice already committed
    @ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3)
    class ModelWorker:
        """Holds the models once; answers shards of texts."""

        def __init__(self, embedder: dict, ner_backend: str) -> None:
            self.local = _actor_models(embedder, ner_backend)

        def encode(self, texts: list[str]) -> np.ndarray:
            return self.local.encode(texts)

        def ner(self, texts: list[str]) -> list[list[tuple[str, str]]]:
            return self.local.ner(texts)

        def _llm(self, llm_cfg: dict):
            if getattr(self, "llm_backend", None) is None:
                from engine.config import LLMConfig  # in the actor process
                from engine.models import make_backend  # in the actor process

                llm_cfg = {**llm_cfg, "device": actor_device(llm_cfg["device"])}
                self.llm_backend = make_backend(LLMConfig(**llm_cfg))
            return self.llm_backend

        def llm_model_id(self, llm_cfg: dict) -> str:
            return self._llm(llm_cfg).model_id

        def generate(self, llm_cfg: dict, prompts: list, params):
            return self._llm(llm_cfg).generate(prompts, params)

        def count_tokens(self, llm_cfg: dict, prompts: list) -> list[int]:
            return self._llm(llm_cfg).count_tokens(prompts)

    return ModelWorker


def connect(ray, address: str, workers: int) -> None:
    """Join the cluster named by `address`, or start a private one of `workers` CPUs.

    'local' starts a private cluster, except inside `ray job submit`, which sets RAY_ADDRESS:
    the job then runs on the cluster it was submitted to (ray.init refuses a CPU count there).
    """
    import os

    target = os.environ.get("RAY_ADDRESS") if address == "local" else address
    if not target:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        return
    problem = unreachable(target)
    if problem is None:
        try:
            ray.init(address=target, log_to_driver=False)
            return
        except ConnectionError as err:
            problem = str(err)
    raise ConfigError(
        f"cannot reach the Ray cluster at {target!r} ({problem}); start one with "
        "`ray start --head`, or use --address local for a private one"
    )


@contextmanager
def ray_session(address: str, workers: int) -> Iterator[Any]:
    """The `ray` module, connected for the duration: the session already open, else the cluster
    `address` names (or a private one of `workers` CPUs); shuts down only what it started, so
    several runs inside one session share one cluster."""
    import ray  # ray is an optional extra

    started = not ray.is_initialized()
    if started:
        connect(ray, address, workers)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def warn_missing_gpus(ray, gpus_per_worker: float) -> None:
    """Say on stderr when actors will ask for GPUs the cluster does not have now: Ray keeps
    such actors pending without a word until a GPU node joins (an autoscaler may add one)."""
    import sys

    have = ray.cluster_resources().get("GPU", 0)
    if gpus_per_worker > 0 and have < gpus_per_worker:
        print(
            f"warning: each Ray actor asks for {gpus_per_worker:g} GPU, the cluster has {have:g} "
            "now; the actors wait until a GPU node joins (set ray_gpus_per_worker: 0 and the "
            "models' device: cpu to run on CPUs)",
            file=sys.stderr,
        )


def unreachable(address: str) -> str | None:
    """Why a host:port (or ray://host:port) address takes no connection, None when it does or
    when the address names no port ('auto'): Ray itself waits minutes for an absent cluster."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as err:
        return f"{type(err).__name__}: {err}"
    return None


class RayLLMBackend:
    """An LLM backend whose engines live in the executor's actors (one per worker): a batch is
    split into one shard per actor and answered in parallel, in input order."""

    def __init__(self, executor: RayExecutor, llm_cfg: dict) -> None:
        self.executor = executor
        self.cfg = llm_cfg
        self.model_id = executor._ray.get(executor.actors[0].llm_model_id.remote(llm_cfg))

    def generate(self, prompts: list, params, on_done=None) -> list:
        """One shard per actor, answered in parallel; each shard goes to `on_done` as it
        returns, and the answers come back in input order."""
        ex = self.executor
        futures, start = {}, 0
        for actor, shard in zip(ex.actors, ex._shards(prompts), strict=True):
            if shard:
                futures[actor.generate.remote(self.cfg, shard, params)] = start
            start += len(shard)
        out: list = [None] * len(prompts)
        pending = list(futures)
        while pending:
            ready, pending = ex._ray.wait(pending, num_returns=1)
            lo = futures[ready[0]]
            answers = ex._ray.get(ready[0])
            out[lo : lo + len(answers)] = answers
            if on_done is not None:
                on_done(list(range(lo, lo + len(answers))), answers)
        return out

    def count_tokens(self, prompts: list) -> list[int]:
        """Prompt tokens, counted by the first actor's tokenizer."""
        return self.executor._ray.get(
            self.executor.actors[0].count_tokens.remote(self.cfg, prompts)
        )


class RayExecutor:
    """Embedding and NER as Ray Data pipelines over actor pools; an in-process LLM in
    `workers` model actors (created when a stage first asks for the LLM). `address` 'local'
    starts a private cluster."""

    name = "ray"

    def __init__(
        self,
        embedder: EmbedderConfig,
        ner_backend: str,
        address: str = "local",
        workers: int = 2,
        gpus_per_worker: float = 0.0,
    ) -> None:
        try:
            import ray  # noqa: F401 (only to say what is missing before any work)
        except ImportError:
            raise ConfigError(
                "executor 'ray' needs Ray: pip install 'graphrag-engine[ray]'"
            ) from None
        self._session = ExitStack()
        self._ray = ray = self._session.enter_context(ray_session(address, workers))
        warn_missing_gpus(ray, gpus_per_worker)
        self.embedder_cfg, self.ner_backend = embedder, ner_backend
        self.workers, self.gpus = workers, gpus_per_worker
        self._actors: list = []
        # the ids the manifest records, from a one-off task whose process exits after it
        ids = ray.remote(num_cpus=1, num_gpus=gpus_per_worker, max_calls=1)(_model_ids)
        self.model_id, self.ner_model_id = ray.get(ids.remote(asdict(embedder), ner_backend))

    @property
    def actors(self) -> list:
        """The model actors (an embedder, NER and the LLM each), started on first use."""
        if not self._actors:
            # an actor holding a model on CUDA asks Ray for its GPU (share with a fraction < 1)
            worker = _worker_class().options(num_gpus=self.gpus)
            args = (asdict(self.embedder_cfg), self.ner_backend)
            self._actors = [worker.remote(*args) for _ in range(self.workers)]
        return self._actors

    def _shards(self, items: list) -> list[list]:
        n = len(self.actors)
        size = -(-len(items) // n) if items else 0
        return [items[i * size : (i + 1) * size] for i in range(n)]

    def encode_blocks(self, texts: list[str]) -> Iterator[tuple[list[int], np.ndarray]]:
        """(positions, vectors) of the texts, block by block: a Ray Data pipeline over a pool
        of embedders (engine/exec/ray_data.py); the model actors instead once they hold the
        cluster's CPUs for the LLM, so the two never wait on each other."""
        if self._actors:
            yield range(len(texts)), self.encode(texts)
            return
        args = (asdict(self.embedder_cfg),)
        for out in stream_blocks(EmbedBlocks, args, texts, self.workers, self.gpus):
            yield out["pos"].tolist(), out["out"]

    def ner_blocks(self, texts: list[str]) -> Iterator[tuple[list[int], list]]:
        """(positions, mentions) of the texts, block by block: a Ray Data pipeline over a pool
        of entity recognizers (the model actors once they exist, as for `encode_blocks`)."""
        if self._actors:
            yield range(len(texts)), self.ner(texts)
            return
        args = (self.ner_backend,)
        for out in stream_blocks(TagBlocks, args, texts, self.workers, self.gpus):
            yield out["pos"].tolist(), [[tuple(m) for m in json.loads(f)] for f in out["out"]]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of the texts, computed by the model actors in parallel."""
        parts = [(a, s) for a, s in zip(self.actors, self._shards(texts), strict=True) if s]
        results = self._ray.get([a.encode.remote(s) for a, s in parts])
        return np.concatenate(results) if results else np.zeros((0, 0), np.float32)

    def ner(self, texts: list[str]) -> list[list[tuple[str, str]]]:
        """Entities of every text, computed by the model actors in parallel."""
        parts = [(a, s) for a, s in zip(self.actors, self._shards(texts), strict=True) if s]
        out: list = []
        for r in self._ray.get([a.ner.remote(s) for a, s in parts]):
            out.extend([tuple(m) for m in ents] for ents in r)
        return out

    def llm_backend(self, llm_cfg) -> RayLLMBackend | None:
        """In-process LLM backends move onto the cluster: vLLM through Ray's batch LLM
        processor where `ray.data.llm` and vLLM are installed (engine/exec/ray_llm.py), else
        one engine per model actor (transformers, vllm); servers stay remote."""
        if llm_cfg.backend not in ("transformers", "vllm"):
            return None
        if llm_cfg.backend == "vllm" and ray_data_llm_available():
            return RayDataVLLM(asdict(llm_cfg), self.workers)
        return RayLLMBackend(self, asdict(llm_cfg))

    def close(self) -> None:
        """Release the actors (and the cluster this executor started)."""
        for a in self._actors:
            self._ray.kill(a)
        self._session.close()


def _actor_models(embedder: dict, ner_backend: str):
    """The embedder and NER of the driver's config, as a process on the cluster holds them."""
    quiet_actor()
    from engine.exec.local import LocalExecutor  # in the actor process

    return LocalExecutor(actor_embedder(embedder), ner_backend)


def _model_ids(embedder: dict, ner_backend: str) -> tuple[str, str]:
    """Ids of the embedder and the entity recognizer a config names (run on the cluster, where
    the models are)."""
    local = _actor_models(embedder, ner_backend)
    return local.model_id, local.ner_model_id
