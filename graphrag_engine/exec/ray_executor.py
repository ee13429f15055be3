"""Ray executor: the model stages of an index build on a local or running Ray cluster.
Embedding and NER go to one pool of model actors kept for the whole build
(graphrag_engine/exec/ray_pool.py); in-process LLM generation runs as Ray Data pipelines
(graphrag_engine/exec/ray_llm.py). Results come back block by block with their positions and
merge into one index."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from graphrag_engine.config import EmbedderConfig
from graphrag_engine.errors import ConfigError
from graphrag_engine.exec.ray_data import actor_device, by_position
from graphrag_engine.exec.ray_llm import RayDataLLM, RayDataVLLM, ray_data_llm_available
from graphrag_engine.exec.ray_pool import ModelPool

log = logging.getLogger(__name__)

__all__ = ["RayExecutor", "actor_device", "connect", "ray_session", "warn_missing_gpus"]


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

    have = ray.cluster_resources().get("GPU", 0)
    if gpus_per_worker > 0 and have < gpus_per_worker:
        log.warning(
            f"warning: each Ray actor asks for {gpus_per_worker:g} GPU, the cluster has {have:g} "
            "now; the actors wait until a GPU node joins (set ray_gpus_per_worker: 0 and the "
            "models' device: cpu to run on CPUs)",
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


class RayExecutor:
    """Embedding and NER on one pool of `workers` model actors (`gpus_per_worker` GPUs each)
    kept for the executor's life, in-process LLM generation as Ray Data pipelines over pools of
    as many engines; results come back as Parquet parts in `parts` when given. `address`
    'local' starts a private cluster."""

    name = "ray"

    def __init__(
        self,
        embedder: EmbedderConfig,
        ner_backend: str,
        address: str = "local",
        workers: int = 2,
        gpus_per_worker: float = 0.0,
        parts: Path | None = None,
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
        # where pool actors write their results (None: back through Ray); parts a killed
        # driver left are cleared with the index writer's stale .staging-* folders
        self.parts = parts
        self.models = ModelPool(ray, asdict(embedder), ner_backend, workers, gpus_per_worker, parts)
        # the ids the manifest records, from the pool's first actor (which keeps its models)
        self.model_id, self.ner_model_id = self.models.model_ids()

    def encode_blocks(self, texts: list[str]) -> Iterator[tuple[list[int], np.ndarray]]:
        """(positions, vectors) of the texts, block by block, from the pool's embedders."""
        for out in self.models.blocks("embed", texts):
            yield out["pos"].tolist(), out["out"]

    def ner_blocks(self, texts: list[str]) -> Iterator[tuple[list[int], list]]:
        """(positions, mentions) of the texts, block by block, from the pool's entity
        recognizers."""
        for out in self.models.blocks("tag", texts):
            yield out["pos"].tolist(), [[tuple(m) for m in json.loads(f)] for f in out["out"]]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of the texts in input order (one pipeline)."""
        return np.stack(gathered(texts, self.encode_blocks)) if texts else np.zeros((0, 0))

    def ner(self, texts: list[str]) -> list[list[tuple[str, str]]]:
        """Entities of every text in input order (one pipeline)."""
        return gathered(texts, self.ner_blocks)

    def llm_backend(self, llm_cfg) -> RayDataLLM | RayDataVLLM | None:
        """In-process LLM backends move onto the cluster as Ray Data pipelines: vLLM through
        Ray's batch LLM processor where `ray.data.llm` and vLLM are installed, else a pool of
        actors each holding one engine (transformers, vllm) (graphrag_engine/exec/ray_llm.py); servers
        stay remote. Each generation releases the model pool first: its engines need the
        pool's CPUs and GPUs."""
        if llm_cfg.backend not in ("transformers", "vllm"):
            return None
        room = self.models.release
        if llm_cfg.backend == "vllm" and ray_data_llm_available():
            return RayDataVLLM(asdict(llm_cfg), self.workers, self.parts, make_room=room)
        return RayDataLLM(asdict(llm_cfg), self.workers, self.gpus, self.parts, make_room=room)

    def close(self) -> None:
        """End the model pool, then release the parts folder and the cluster this executor
        started (the LLM pools end with their pipelines)."""
        self.models.release()
        if self.parts is not None:
            shutil.rmtree(self.parts, ignore_errors=True)
        self._session.close()


def gathered(texts: list[str], blocks: Callable[[list[str]], Iterator]) -> list:
    """The values `blocks` gives for the texts (positions, values), in input order."""
    return by_position(len(texts), blocks(texts))
