"""A sharded run of several methods starts one Ray cluster for all of them (each method's run
joins it), and shuts down what it started; a run inside an open session leaves it open."""

from __future__ import annotations

import pytest

from graphrag_engine import Engine
from graphrag_engine.api import RayPlacement
from graphrag_engine.exec import ray_executor
from graphrag_engine.results import read_rows

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_multi_method_run_starts_one_cluster(musique_subset, tmp_path, monkeypatch) -> None:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # the session's shared cluster: this test is about starting one
        ray.shutdown()
    assert not ray.is_initialized()
    started = []
    real_connect = ray_executor.connect

    def counting_connect(*args) -> None:
        started.append(args)
        real_connect(*args)

    monkeypatch.setattr(ray_executor, "connect", counting_connect)
    runs = Engine(musique_subset["index"]).run_many(
        ["bm25", "naive"], musique_subset["questions"], tmp_path, limit=8, retrieval_only=True,
        batch_size=4, ray=RayPlacement(workers=2),
    )  # fmt: skip
    assert len(started) == 1
    assert not ray.is_initialized()
    for run in runs.values():
        assert len(read_rows(run.folder / "results.parquet")) == 8

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # the session's again
    Engine(musique_subset["index"]).run_many(
        ["bm25"], musique_subset["questions"], tmp_path / "again", limit=4,
        retrieval_only=True, batch_size=4, ray=RayPlacement(workers=2),
    )  # fmt: skip
    assert ray.is_initialized()
    assert len(started) == 1
