"""Whether two indexes hold the same thing: every table's rows (in any order) and every
vector file's rows matched by id, whatever their generations, paths or build times."""

from __future__ import annotations

import json

import numpy as np

from graphrag_engine.store.index_store import Index

CONTENT_TABLES = ["documents", "chunks", "units", "entities", "relations", "unit_entity"]
VECTORS = {  # vector file -> (table its rows belong to, id column)
    "chunk_vectors": ("chunks", "chunk_id"),
    "unit_vectors": ("units", "unit_id"),
    "entity_vectors": ("entities", "entity_id"),
}


def table_rows(idx: Index, name: str, key: str) -> list[dict]:
    """A table's rows, sorted by `key` (then by the whole row)."""
    return sorted(
        idx.table(name).to_pylist(),
        key=lambda r: (r[key], json.dumps(r, sort_keys=True, default=str)),
    )


def vectors_by_id(idx: Index, vec: str, table: str, key: str) -> dict[str, np.ndarray]:
    """A vector file's rows keyed by the ids of the table they belong to."""
    ids = idx.table(table, columns=[key])[key].to_pylist()
    mat = idx.vectors(vec)
    return {i: mat[n] for n, i in enumerate(ids)}


def index_differences(
    a: Index, b: Index, tables: list[str] = CONTENT_TABLES, atol: float = 1e-5
) -> list[str]:
    """What differs between two indexes (empty when they hold the same): tables compared row
    by row (a document's source path aside, which names the file it was read from), vectors
    by id within `atol`."""
    out = []
    for t in tables:
        if a.has(t) != b.has(t):
            out.append(f"{t}: in one index only")
            continue
        if not a.has(t):
            continue
        key = a.table(t).schema.names[0]
        ra, rb = table_rows(a, t, key), table_rows(b, t, key)
        if t == "documents":
            ra = [{**r, "source": None} for r in ra]
            rb = [{**r, "source": None} for r in rb]
        if ra != rb:
            differ = sum(x != y for x, y in zip(ra, rb, strict=False))
            out.append(f"{t}: {len(ra)} vs {len(rb)} rows, {differ} of the first differ")
    for vec, (table, key) in VECTORS.items():
        if not (a.has(vec) and b.has(vec)):
            if a.has(vec) != b.has(vec):
                out.append(f"{vec}: in one index only")
            continue
        va, vb = vectors_by_id(a, vec, table, key), vectors_by_id(b, vec, table, key)
        if va.keys() != vb.keys():
            out.append(f"{vec}: the ids differ")
        elif not all(np.allclose(va[k], vb[k], atol=atol) for k in va):
            out.append(f"{vec}: vectors differ beyond {atol}")
    return out
