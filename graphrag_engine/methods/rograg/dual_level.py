"""ROGRAG's dual-level matching: each low-level key to entities and each high-level key to
relations, one key at a time (fuzzy: top-k by embedding above a similarity floor; exact: the
entity whose normalized name equals the key), merged and deduplicated into nodes, edges and
chunk references. Every key of every question is one embedding call per level.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphrag_engine.names import normalize_name
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import (
    EntityGraph,
    chunks_by_entities,
    entity_graph,
    search,
)


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
    top_k: int,
    floor: float,
    exact: bool = False,
) -> list[Matched]:
    """Every question's keys matched to the graph: low keys to entities (fuzzy or exact),
    high keys to relations (fuzzy), then the entities' relations and the relations' ends."""
    g = entity_graph(ctx)
    low_hits = _exact(g, low) if exact else _fuzzy(ctx, low, "entity_vectors", top_k, floor)
    high_hits = _fuzzy(ctx, high, "relation_vectors", top_k, floor)
    out = []
    for ents, rels in zip(low_hits, high_hits, strict=True):
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
        out.append(Matched(entities, relations, chunks))
    return out


def _fuzzy(ctx: QueryContext, keys: list[list[str]], table: str, top_k: int, floor: float):
    """Per question, the rows the keys find (each key its top_k above `floor`), key by key."""
    flat = [k for ks in keys for k in ks]
    ids, sims = search(ctx, flat, table, top_k)
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


def _exact(g: EntityGraph, keys: list[list[str]]) -> list[list[int]]:
    """Per question, the entities whose normalized name equals a key (Table 5's ablation)."""
    by_name: dict[str, list[int]] = {}
    for e, name in enumerate(g.names):
        by_name.setdefault(normalize_name(name), []).append(e)
    return [
        list(dict.fromkeys(e for k in ks for e in by_name.get(normalize_name(k), [])))
        for ks in keys
    ]
