"""A query run's objects are frozen for the cycle collector from its first batch to its end."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from graphrag_engine.query.heap import SettledHeap


class Node:
    """An object that can sit in a reference cycle and be watched through a weak reference."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref:
    """A two-node reference cycle nothing else holds; a weak reference to one node."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_freezes_once_and_the_end_unfreezes() -> None:
    """The first settle freezes every object alive, a second one does nothing, and the end
    gives the frozen objects back to the collector; a run that never settled changes nothing."""
    assert gc.get_freeze_count() == 0
    with SettledHeap():
        pass
    assert gc.get_freeze_count() == 0
    with SettledHeap() as heap:
        kept = [Node() for _ in range(100)]
        heap.settle()
        frozen = gc.get_freeze_count()
        assert frozen >= 100
        more = [Node() for _ in range(100)]
        heap.settle()
        assert gc.get_freeze_count() == frozen  # not frozen again
    assert gc.get_freeze_count() == 0
    assert kept and more


def test_garbage_of_frozen_objects_is_collected_after_the_run() -> None:
    """A cycle alive at the freeze turned garbage is left alone while frozen and collected once
    the run ends; one made after the freeze is collected at once."""
    with SettledHeap() as heap:
        a, b = Node(), Node()
        a.other, b.other = b, a
        old = weakref.ref(a)
        heap.settle()
        del a, b
        gc.collect()
        assert old() is not None  # frozen: the collector skips it
        new = cycle()
        gc.collect()
        assert new() is None
    gc.collect()
    assert old() is None


@pytest.mark.parametrize("together", [False, True])
def test_a_query_run_leaves_nothing_frozen(tmp_path: Path, together: bool) -> None:
    """A run of several batches (and its answers-together variant) settles after its first
    batch and unfreezes at its end, so the calling process keeps its collector as it was."""
    from graphrag_engine.cli import main

    frozen: list[int] = []
    settle = SettledHeap.settle

    def watched(heap: SettledHeap) -> None:
        settle(heap)
        frozen.append(gc.get_freeze_count())

    args = ["query", "none", "demo", "--method", "none", "--limit", "3", "--batch-size", "1"]
    args += ["--out", str(tmp_path / "run"), "--retrieval-only"]
    mp = pytest.MonkeyPatch()
    mp.setattr(SettledHeap, "settle", watched)
    try:
        assert main(args + (["--answers-together"] if together else [])) == 0
    finally:
        mp.undo()
    assert frozen and all(n > 0 for n in frozen)
    assert gc.get_freeze_count() == 0
