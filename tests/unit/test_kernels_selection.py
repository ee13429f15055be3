"""Algorithm 1's add / remove selection (graphrag_engine/kernels/selection.py) against a
plain re-statement of the algorithm that recomputes every set's distance from scratch."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.kernels.selection import stepwise_select


def set_distance(vectors: np.ndarray, members: list[int], query: np.ndarray) -> float:
    """1 - cosine between the members' summed unit vectors and the unit query (1 for none)."""
    if not members:
        return 1.0
    total = vectors[members].sum(axis=0)
    norm = float(np.linalg.norm(total))
    return 1.0 if norm == 0 else 1.0 - float(total @ query) / norm


def reference(vectors: np.ndarray, query: np.ndarray, max_size: int) -> list[int]:
    """Algorithm 1 word for word: add the best outsider if it improves, drop the best member
    if that improves, stop when a round changes nothing."""
    chosen: list[int] = []
    best = set_distance(vectors, chosen, query)
    for _ in range(64):
        changed = False
        outside = [e for e in range(len(vectors)) if e not in chosen]
        if len(chosen) < max_size and outside:
            dist = [set_distance(vectors, [*chosen, e], query) for e in outside]
            k = int(np.argmin(dist))
            if dist[k] < best - 1e-12:
                chosen.append(outside[k])
                best = dist[k]
                changed = True
        if len(chosen) > 1:
            dist = [
                set_distance(vectors, chosen[:i] + chosen[i + 1 :], query)
                for i in range(len(chosen))
            ]
            i = int(np.argmin(dist))
            if dist[i] < best - 1e-12:
                chosen.pop(i)
                best = dist[i]
                changed = True
        if not changed:
            break
    return chosen


@pytest.mark.parametrize("seed", range(8))
def test_selection_matches_the_reference_and_never_gets_farther(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 40)), 16
    v = rng.normal(size=(n, d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    q = rng.normal(size=d)
    q /= np.linalg.norm(q)
    size = int(rng.integers(1, 10))
    got = stepwise_select(v, q, size)
    assert got == reference(v, q, size)
    assert 1 <= len(got) <= size and len(set(got)) == len(got)
    best_single = min(set_distance(v, [e], q) for e in range(n))
    assert set_distance(v, got, q) <= best_single + 1e-9  # the first pick is the best single
    # no single add (within the size) or removal improves the final set
    final = set_distance(v, got, q)
    if len(got) < size:
        assert all(set_distance(v, [*got, e], q) >= final - 1e-9 for e in range(n) if e not in got)
    if len(got) > 1:
        assert all(
            set_distance(v, got[:i] + got[i + 1 :], q) >= final - 1e-9 for i in range(len(got))
        )


def test_a_passage_far_from_the_question_is_left_out() -> None:
    q = np.array([1.0, 0.0])
    v = np.array([[1.0, 0.0], [0.8, 0.6], [-1.0, 0.0], [0.6, -0.8]])
    got = stepwise_select(v, q, 4)
    assert got[0] == 0 and 2 not in got
    assert set_distance(v, got, q) == pytest.approx(0.0, abs=1e-9)
