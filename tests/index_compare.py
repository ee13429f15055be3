"""Comparing two indexes row by row (tables sorted by key, vectors matched by id)."""

from __future__ import annotations

import json

import numpy as np

TABLES = ["documents", "chunks", "units", "entities", "relations", "unit_entity"]


def table_rows(idx, name: str, key: str) -> list[dict]:
    """A table's rows, sorted by `key` (then by the whole row)."""
    return sorted(
        idx.table(name).to_pylist(),
        key=lambda r: (r[key], json.dumps(r, sort_keys=True, default=str)),
    )


def vectors_by_id(idx, vec: str, table: str, key: str) -> dict[str, np.ndarray]:
    """A vector file's rows keyed by the ids of the table they belong to."""
    ids = idx.table(table, columns=[key])[key].to_pylist()
    mat = idx.vectors(vec)
    return {i: mat[n] for n, i in enumerate(ids)}


def assert_same_index(a, b, tables: list[str] = TABLES) -> None:
    """Same rows in every table (a document's source path aside) and the same unit vectors."""
    for t in tables:
        key = a.table(t).schema.names[0]
        ra, rb = table_rows(a, t, key), table_rows(b, t, key)
        if t == "documents":  # the source (file:line) of a record may differ between runs
            ra = [{**r, "source": None} for r in ra]
            rb = [{**r, "source": None} for r in rb]
        assert ra == rb, t
    va = vectors_by_id(a, "unit_vectors", "units", "unit_id")
    vb = vectors_by_id(b, "unit_vectors", "units", "unit_id")
    assert va.keys() == vb.keys() and all(np.allclose(va[k], vb[k], atol=1e-5) for k in va)
