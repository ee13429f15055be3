"""ROGRAG's dual-level matching (section 6.1, Table 5): low-level keys to entities and
high-level keys to relations, merged and deduplicated into nodes, edges and chunk references.

- fuzzy (the paper's method): a level's keys joined into one text, embedded once, its top-k
  rows above a similarity floor;
- exact (the paper's alternative): each key embedded and matched on its own (its top-k above
  the floor), so no key's meaning is blended with another's;
- name (an engine option): low keys to the entities whose normalized name equals the key,
  high keys as in exact.

All texts of a level, every question's, go in one embedding call. The merged chunk references
keep the order the keys found them, or, given the questions' vectors, are ordered by cosine to
the question (LightRAG's VECTOR pick; ROGRAG's dual level is LightRAG's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from graphrag_engine.names import normalize_name
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import (
    by_similarity,
    chunks_by_entities,
    entity_graph,
    search,
)
from graphrag_engine.retrieve.linking import entities_by_name


@dataclass
class Matched:
    """One question's merged match: entity rows, relation rows and chunk rows, each once, in
    the order the keys found them."""

    entities: list[int]
    relations: list[int]
    chunks: list[int]


def match_keys(
    ctx: QueryContext,
    low: list[list[str]],
    high: list[list[str]],
    top_k: tuple[int, int],
    floor: float,
    match: Literal["fuzzy", "exact", "name"] = "fuzzy",
    questions: list[str] | None = None,
) -> list[Matched]:
    """Every question's keys matched to the graph: low keys to entities and high keys to
    relations (`match`: fuzzy, exact or name; `top_k`: entities per low key, relations per
    high key), then the entities' relations and the relations' ends; with the `questions`'
    texts, each question's chunks by cosine to it (keys and questions in one encoder call)."""
    g = entity_graph(ctx)
    if match == "fuzzy":
        low, high = _joined(low), _joined(high)
    low_flat = [] if match == "name" else [k for ks in low for k in ks]
    low_vecs, high_vecs, question_vectors = ctx.encode_query_groups(
        low_flat, [k for ks in high for k in ks], questions or []
    )
    if match == "name":
        low_hits = _by_name(ctx, low)
    else:
        low_hits = _per_key(ctx, low, "entity_vectors", top_k[0], floor, low_vecs)
    high_hits = _per_key(ctx, high, "relation_vectors", top_k[1], floor, high_vecs)
    out = []
    for q, (ents, rels) in enumerate(zip(low_hits, high_hits, strict=True)):
        from_ents = [r for e in ents for r in g.relations_of(e).tolist()]
        relations = list(dict.fromkeys([*rels, *from_ents]))
        entities = list(
            dict.fromkeys([*ents, *(int(x) for r in rels for x in (g.src[r], g.dst[r]))])
        )
        chunks = list(
            dict.fromkeys(
                [
                    *chunks_by_entities(g, ents),
                    *(c for r in rels for c in g.relation_chunks[r].tolist()),
                ]
            )
        )
        if questions is not None:
            chunks = by_similarity(ctx, question_vectors[q], chunks)
        out.append(Matched(entities, relations, chunks))
    return out


def _joined(keys: list[list[str]]) -> list[list[str]]:
    """Per question, its keys as one text (none when it has no key)."""
    return [["; ".join(ks)] if ks else [] for ks in keys]


def _per_key(
    ctx: QueryContext,
    keys: list[list[str]],
    table: str,
    top_k: int,
    floor: float,
    vectors: np.ndarray,
):
    """Per question, the rows the keys find (each key its top_k above `floor`), key by key
    (`vectors`: the keys' vectors, in order)."""
    flat = [k for ks in keys for k in ks]
    ids, sims = search(ctx, flat, table, top_k, vectors)
    out, row = [], 0
    for ks in keys:
        found: dict[int, None] = {}
        for i in range(row, row + len(ks)):
            found.update(
                dict.fromkeys(
                    int(x) for x, s in zip(ids[i], sims[i], strict=True) if x >= 0 and s >= floor
                )
            )
        row += len(ks)
        out.append(list(found))
    return out


def _by_name(ctx: QueryContext, keys: list[list[str]]) -> list[list[int]]:
    """Per question, the entities whose normalized name equals a key."""
    by_name = entities_by_name(ctx)
    return [
        list(dict.fromkeys(e for k in ks for e in by_name.get(normalize_name(k), [])))
        for ks in keys
    ]
