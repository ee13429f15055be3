"""Synonym edges equal a brute-force scan of every pair (exact top-k and HNSW paths)."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.index import synonyms
from graphrag_engine.index.synonyms import synonym_edges


def _vectors(seed: int = 0, n: int = 300, d: int = 16) -> np.ndarray:
    """Clusters of near-duplicate vectors among random ones."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, d))
    twins = base[: n // 5] + 0.15 * rng.normal(size=(n // 5, d))
    return np.vstack([base, twins]).astype(np.float32)


def _brute_force(v: np.ndarray, threshold: float, top_k: int) -> set[tuple[int, int]]:
    u = v / np.linalg.norm(v, axis=1, keepdims=True)
    sim = u @ u.T
    pairs = set()
    for i in range(len(v)):
        order = [j for j in np.argsort(-sim[i], kind="stable") if j != i][:top_k]
        pairs |= {(min(i, j), max(i, j)) for j in order if sim[i, j] >= threshold}
    return pairs


@pytest.mark.parametrize("threshold,top_k", [(0.8, 10), (0.95, 3), (0.5, 1)])
def test_edges_equal_a_scan_of_every_pair(threshold: float, top_k: int) -> None:
    v = _vectors()
    src, dst, cos = synonym_edges(v, threshold, top_k)
    assert set(zip(src.tolist(), dst.tolist(), strict=True)) == _brute_force(v, threshold, top_k)
    assert np.all(src < dst) and np.all(cos >= threshold - 1e-6)
    u = v / np.linalg.norm(v, axis=1, keepdims=True)
    np.testing.assert_allclose(cos, np.sum(u[src] * u[dst], axis=1), atol=1e-5)
    assert src.size > 0


def test_the_ann_path_finds_the_same_edges(monkeypatch) -> None:
    pytest.importorskip("faiss")
    v = _vectors(1)
    exact = synonym_edges(v, 0.8, 5)
    monkeypatch.setattr(synonyms, "ANN_FROM", 10)
    approx = synonym_edges(v, 0.8, 5)
    found = set(zip(approx[0].tolist(), approx[1].tolist(), strict=True))
    want = set(zip(exact[0].tolist(), exact[1].tolist(), strict=True))
    assert len(found & want) >= 0.98 * len(want)


def test_no_edges_for_fewer_than_two_or_distant_entities() -> None:
    assert synonym_edges(np.zeros((1, 4), np.float32), 0.8, 5)[0].size == 0
    assert synonym_edges(np.eye(4, dtype=np.float32), 0.8, 5)[0].size == 0
