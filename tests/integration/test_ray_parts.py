"""Ray pool actors write each block's results as a Parquet part that the driver reads, hands on (the part that needs models, servers or real data)."""

from __future__ import annotations

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
    assert list(parts.iterdir()) == []  # every part deleted once the next block was asked for
