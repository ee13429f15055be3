"""Ray pool actors write each block's results as a Parquet part that the driver reads, hands on (the part that needs models, servers or real data)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest


@pytest.mark.ray
@pytest.mark.slow
def test_blocks_through_parts_equal_blocks_through_ray(tmp_path: Path, ray_cluster) -> None:
    from graphrag_engine.exec.ray_data import TagBlocks, stream_blocks

    texts = [f"Ada Lovelace met Charles Babbage in London in {1830 + i}." for i in range(11)]
    parts = tmp_path / "parts"
    direct = {}
    for out in stream_blocks(TagBlocks, ("rules",), texts, 2, 0.0, block=3):
        direct.update(zip(out["pos"].tolist(), out["out"].tolist(), strict=True))
    through, held = {}, []
    for out in stream_blocks(TagBlocks, ("rules",), texts, 2, 0.0, block=3, parts=parts):
        held.append(len(list(parts.glob("*.parquet"))))
        through.update(zip(out["pos"].tolist(), out["out"].tolist(), strict=True))
    assert sorted(direct) == list(range(11)) and through == direct
    assert len(held) == 4 and min(held) >= 1  # each block was read from its part on disk
    assert list(parts.glob("*.parquet")) == []  # every part deleted once the next was asked for


def model_actor_pids() -> set[int]:
    """Pids of the running processes of the Ray executor's model actors."""
    import psutil

    return {
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if any("ray::ModelActor" in part for part in p.info["cmdline"] or [])
    }


@pytest.mark.ray
@pytest.mark.slow
def test_the_model_pool_serves_every_stage_and_equals_ray_data(tmp_path: Path, ray_cluster) -> None:
    """The executor's model pool answers as Ray Data's pipeline does, through parts as without,
    from the same two actor processes call after call (a stage starts no pool of its own);
    `release` ends them."""
    from dataclasses import asdict

    from graphrag_engine.config import EmbedderConfig
    from graphrag_engine.exec.ray_data import TagBlocks, stream_blocks
    from graphrag_engine.exec.ray_pool import ModelPool

    texts = [f"Ada Lovelace met Charles Babbage in London in {1830 + i}." for i in range(11)]
    expected = {}
    for out in stream_blocks(TagBlocks, ("rules",), texts, 2, 0.0, block=3):
        expected.update(zip(out["pos"].tolist(), out["out"].tolist(), strict=True))
    embedder = asdict(EmbedderConfig())
    pids = []
    for parts in (None, tmp_path / "parts"):
        pool = ModelPool(ray_cluster, embedder, "rules", 2, 0.0, parts)
        for _ in range(2):
            got = {}
            for out in pool.blocks("tag", texts, block=3):
                got.update(zip(out["pos"].tolist(), out["out"].tolist(), strict=True))
            assert got == expected
            pids.append(model_actor_pids())
        pool.release()
        assert pids[-1] == pids[-2] and len(pids[-1]) == 2
        deadline = time.time() + 30
        while model_actor_pids() and time.time() < deadline:
            time.sleep(0.1)
        assert not model_actor_pids()
    assert list((tmp_path / "parts").glob("*.parquet")) == []  # beside the engine's mark
