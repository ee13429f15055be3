"""LightRAG's VECTOR pick of the chunks behind entities or relations, against a sort of the
cosines by hand."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from graphrag_engine.retrieve.entity_graph import by_similarity


def _ctx(vectors: np.ndarray) -> SimpleNamespace:
    """The one part of a query context the pick reads: unit chunk vectors."""
    return SimpleNamespace(chunk_vectors=vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def test_chunks_come_by_cosine_to_the_question_ties_in_given_order() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(50, 16)).astype(np.float32)
    vectors[7] = vectors[11]  # equal vectors: a tie, kept in the order given
    ctx = _ctx(vectors)
    q = rng.normal(size=16).astype(np.float32) * 3.0  # the pick need not get a unit vector
    chunks = [11, 40, 7, 2, 33, 19]
    got = by_similarity(ctx, q, chunks)
    cos = {c: float(ctx.chunk_vectors[c] @ (q / np.linalg.norm(q))) for c in chunks}
    assert sorted(got) == sorted(chunks)
    assert all(cos[a] >= cos[b] - 1e-5 for a, b in zip(got, got[1:], strict=False))
    assert got.index(11) + 1 == got.index(7)
    assert by_similarity(ctx, q, [7, 11]) == [7, 11] and by_similarity(ctx, q, [5]) == [5]
    assert by_similarity(ctx, q, []) == []
