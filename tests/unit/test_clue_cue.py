"""Clue-RAG's batch beam step over the unit-entity adjacency against an item-by-item reference."""

from __future__ import annotations

import numpy as np

from graphrag_engine.kernels.segments import csr_from_pairs
from graphrag_engine.retrieve.cue_graph import CueAdjacency


def test_top_units_equals_item_by_item_reference() -> None:
    """Each item gets the k units of its entity nearest its query, minus its path's units,
    best first and the lower unit on ties; duplicate unit-entity pairs, isolated entities,
    equal vectors and empty paths included."""
    rng = np.random.default_rng(3)
    n_units, n_ents = 300, 60
    u = rng.integers(0, n_units, 900)
    e = rng.integers(0, n_ents - 5, 900)  # the last 5 entities mention nothing
    ent_indptr, ent_units = csr_from_pairs(e, u, n_ents)
    unit_indptr, unit_ents = csr_from_pairs(u, e, n_units)
    adj = CueAdjacency(ent_indptr, ent_units, unit_indptr, unit_ents, np.zeros(n_units, np.int64))
    entities = [int(x) for x in rng.integers(0, n_ents, 80)]
    paths = [tuple(int(x) for x in rng.choice(n_units, rng.integers(0, 4))) for _ in entities]
    for i, ent in enumerate(entities[:10]):  # paths that hold the entity's own units
        paths[i] = tuple(ent_units[ent_indptr[ent] : ent_indptr[ent + 1]][:2].tolist())
    vectors = rng.standard_normal((n_units, 16)).astype(np.float32)
    vectors[1::7] = vectors[0]  # ties: equal vectors, so equal scores
    queries = rng.standard_normal((len(entities), 16)).astype(np.float32)
    for k in (1, 3, 50):
        owner, units, scores = adj.top_units(queries, entities, paths, vectors, k)
        want_owner, want_units = [], []
        for i, (ent, path) in enumerate(zip(entities, paths, strict=True)):
            cand = np.unique(ent_units[ent_indptr[ent] : ent_indptr[ent + 1]])
            cand = cand[~np.isin(cand, path)]
            dots = (vectors[cand].astype(np.float64) @ queries[i].astype(np.float64)).astype(
                np.float32
            )
            order = np.lexsort((cand, -dots))[:k]  # best first, the lower unit on ties
            want_owner += [i] * order.size
            want_units += cand[order].tolist()
        assert owner.tolist() == want_owner and units.tolist() == want_units
        np.testing.assert_allclose(
            scores, np.einsum("ij,ij->i", queries[owner], vectors[units]), rtol=1e-5, atol=1e-6
        )
    empty = adj.top_units(queries[:0], [], [], vectors, 3)
    assert all(a.size == 0 for a in empty)
