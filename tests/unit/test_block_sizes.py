"""Model stages feed their models blocks sized by time, so a stage's progress bar moves every
few seconds on a slow or loaded machine, and still reaches the efficient block size on a fast
one (issue: a HotpotQA build's embedding bar stood at 0/7,382 for ten minutes)."""

from __future__ import annotations

import time

import pytest

from graphrag_engine import progress
from graphrag_engine.models.text_cache import in_blocks


def _timed_model(seconds_per_text: float, sizes: list[int], took: list[float]):
    """A model call whose cost grows with its block (sleeping per text), recording each block."""

    def call(texts: list[str]) -> list[int]:
        started = time.perf_counter()
        time.sleep(seconds_per_text * len(texts))
        sizes.append(len(texts))
        took.append(time.perf_counter() - started)
        return [len(t) for t in texts]

    return call


def test_a_slow_model_gets_blocks_that_take_about_the_target(monkeypatch) -> None:
    """At 5 ms a text and a 0.1 s target, blocks settle near 20 texts, not the 4,096 most."""
    monkeypatch.setattr(progress, "BLOCK_SECONDS", 0.1)
    sizes: list[int] = []
    took: list[float] = []
    texts = [f"text {i}" for i in range(400)]
    out = list(in_blocks(None, _timed_model(0.005, sizes, took), texts, 4096))
    assert [v for _, vs in out for v in vs] == [len(t) for t in texts]  # order and coverage kept
    assert [i for r, _ in out for i in r] == list(range(len(texts)))
    assert sizes[0] == 16
    assert max(sizes) <= 40, sizes  # 0.1 s / 5 ms = 20; rounding and sleep overshoot stay < 2x
    assert max(took) < 0.25, took


def test_a_fast_model_reaches_the_largest_block(monkeypatch) -> None:
    """A model far faster than the target grows fourfold a block up to `most`."""
    monkeypatch.setattr(progress, "BLOCK_SECONDS", 0.5)
    sizes: list[int] = []
    texts = ["t"] * 3000
    list(in_blocks(None, _timed_model(0.0, sizes, []), texts, 512))
    assert sizes[:4] == [16, 64, 256, 512], sizes
    assert sum(sizes) == 3000


def test_parallel_workers_share_the_rate(monkeypatch) -> None:
    """With several workers the measured rate is theirs together: each block is sized for one."""
    monkeypatch.setattr(progress, "BLOCK_SECONDS", 1.0)
    one = progress.BlockSizer(10_000, first=10, workers=1)
    four = progress.BlockSizer(10_000, first=10, workers=4)
    for sizer in (one, four):
        sizer.size()
        sizer._started -= 1.0  # one second has passed
        sizer.finished(100)
    assert one.size() == pytest.approx(40, abs=1)  # fourfold growth cap over the first 10
    four.last = one.last = 1000
    assert one.size() == pytest.approx(100, rel=0.05)
    assert four.size() == pytest.approx(25, rel=0.05)
