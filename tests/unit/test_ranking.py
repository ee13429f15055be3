"""Rank merging: a method's own scored chunks lead, a dense list fills after them."""

from __future__ import annotations

import numpy as np

from graphrag_engine.retrieve.ranking import ChunkRanking, lead_then_fill, round_robin


def _fill() -> ChunkRanking:
    ids = np.array([[9, 3, 8, 7, 6], [1, 2, 0, 5, 4]])
    return ChunkRanking(ids, np.linspace(0.9, 0.5, 5, dtype=np.float32)[None].repeat(2, 0))


def test_all_own_chunks_lead_then_the_fill_without_repeats() -> None:
    owner = np.array([0, 0, 0, 1])
    rows, scores = np.array([3, 4, 5, 2]), np.array([0.2, 0.7, 0.4, 0.3], dtype=np.float32)
    r = lead_then_fill(owner, rows, scores, _fill(), depth=6)
    assert r.row(0)[0] == [4, 5, 3, 9, 8, 7]  # own chunks by score, then the fill's others
    assert r.row(1)[0] == [2, 1, 0, 5, 4]
    assert r.row(0)[1][:3] == [np.float32(0.7), np.float32(0.4), np.float32(0.2)]


def test_a_lead_of_n_keeps_the_best_n_own_chunks_first() -> None:
    """Clue-RAG's N: the best N graph chunks lead; the rest of the graph's chunks are not
    preferred over the fill (one that the fill also holds keeps the fill's place)."""
    owner = np.array([0, 0, 0, 1])
    rows, scores = np.array([3, 4, 5, 2]), np.array([0.2, 0.7, 0.4, 0.3], dtype=np.float32)
    r = lead_then_fill(owner, rows, scores, _fill(), depth=6, lead=2)
    assert r.row(0)[0] == [4, 5, 9, 3, 8, 7]  # 3 (own, third best) keeps the fill's place
    assert r.row(1)[0] == [2, 1, 0, 5, 4]
    one = lead_then_fill(owner, rows, scores, _fill(), depth=6, lead=1)
    assert one.row(0)[0] == [4, 9, 3, 8, 7, 6]


def test_round_robin_interleaves_lists_and_keeps_each_id_once() -> None:
    """Against the loop it reads as: a[0], b[0], a[1], b[1], ... skipping ids seen before."""

    def loop(*lists: list[int]) -> list[int]:
        out: list[int] = []
        for i in range(max(map(len, lists), default=0)):
            for side in lists:
                if i < len(side) and side[i] not in out:
                    out.append(side[i])
        return out

    rng = np.random.default_rng(3)
    assert round_robin() == [] and round_robin([], []) == []
    assert round_robin([1, 2, 3], [3, 4], [9]) == [1, 3, 9, 2, 4]
    for sizes in ((5,), (0, 7), (40, 3, 12), (200, 150)):
        lists = [rng.integers(0, 60, size=n).tolist() for n in sizes]
        assert round_robin(*lists) == loop(*lists)
