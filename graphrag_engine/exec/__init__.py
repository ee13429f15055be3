"""Executors for the model-heavy index stages: `local` (in this process) and `ray` (Ray Data
pipelines over model-holding actors). Both return results in input order, so the index they
build is the same."""

from __future__ import annotations

from pathlib import Path

from graphrag_engine.config import EmbedderConfig
from graphrag_engine.errors import ConfigError
from graphrag_engine.exec.local import LocalExecutor


def make_executor(
    kind: str,
    embedder: EmbedderConfig,
    ner_backend: str,
    address: str = "local",
    workers: int = 2,
    gpus_per_worker: float = 0.0,
    parts: Path | None = None,
):
    """The executor named by the config (`local` or `ray`; its pool actors write their results
    as Parquet parts in `parts` when given)."""
    if kind == "local":
        return LocalExecutor(embedder, ner_backend)
    if kind == "ray":
        from graphrag_engine.exec.ray_executor import RayExecutor  # ray is an optional extra

        return RayExecutor(embedder, ner_backend, address, workers, gpus_per_worker, parts)
    raise ConfigError(f"executor must be 'local' or 'ray', got {kind!r}")
