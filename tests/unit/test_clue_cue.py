"""Clue-RAG's batch expansion over the unit-entity adjacency against an item-by-item reference."""

from __future__ import annotations

import numpy as np

from graphrag_engine.kernels.segments import csr_from_pairs
from graphrag_engine.retrieve.cue_graph import CueAdjacency


def test_expand_equals_item_by_item_reference() -> None:
    """Each item gets the distinct units of its entity, minus its path's units, ascending;
    duplicate unit-entity pairs, isolated entities and empty paths included."""
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
    owner, units = adj.expand(entities, paths)
    want_owner, want_units = [], []
    for i, (ent, path) in enumerate(zip(entities, paths, strict=True)):
        cand = np.unique(ent_units[ent_indptr[ent] : ent_indptr[ent + 1]])
        cand = cand[~np.isin(cand, path)]
        want_owner += [i] * cand.size
        want_units += cand.tolist()
    assert owner.tolist() == want_owner and units.tolist() == want_units
    empty = adj.expand([], [])
    assert empty[0].size == 0 and empty[1].size == 0
