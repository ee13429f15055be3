"""Entity resolution: names normalised and merged; co-occurrence relations with added weights;
provenance (chunk ids) kept for every entity and relation."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter, defaultdict
from itertools import combinations

_PUNCT = re.compile(r"[^\w\s-]")


def normalize_name(name: str) -> str:
    """Key under which surface forms merge: NFKC, case-folded, no leading article, no possessive."""
    s = unicodedata.normalize("NFKC", name).casefold().strip()
    s = re.sub(r"['\u2019]s\b", "", s)
    s = _PUNCT.sub(" ", s)
    s = re.sub(r"^(the|a|an)\s+", "", s.strip())
    return re.sub(r"\s+", " ", s).strip()


def entity_id(key: str) -> str:
    """Content-hash id of a normalised entity name."""
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def relation_id(src: str, dst: str) -> str:
    """Id of the (undirected) relation between two entity ids."""
    a, b = sorted((src, dst))
    return hashlib.sha1(f"{a}\x00{b}".encode()).hexdigest()[:16]


def resolve(
    unit_rows: list[dict], mentions: list[list[tuple[str, str]]]
) -> tuple[list[dict], list[dict], list[dict]]:
    """(entities, unit_entity, relations) rows from the mentions found in each unit.

    The name of an entity is its most frequent surface form (ties: the first seen), its type
    the most frequent label; two entities mentioned in the same unit get a co-occurrence
    relation whose weight counts the units they share.
    """
    names: dict[str, Counter] = defaultdict(Counter)
    types: dict[str, Counter] = defaultdict(Counter)
    chunks: dict[str, set[str]] = defaultdict(set)
    unit_entity: list[dict] = []
    pair_weight: Counter = Counter()
    pair_chunks: dict[tuple[str, str], set[str]] = defaultdict(set)
    for unit, found in zip(unit_rows, mentions, strict=True):
        ids = []
        for surface, label in found:
            key = normalize_name(surface)
            if len(key) < 2:
                continue
            eid = entity_id(key)
            names[eid][surface] += 1
            types[eid][label] += 1
            chunks[eid].add(unit["chunk_id"])
            if eid not in ids:
                ids.append(eid)
        for eid in ids:
            unit_entity.append({"unit_id": unit["unit_id"], "entity_id": eid})
        for a, b in combinations(sorted(ids), 2):
            pair_weight[(a, b)] += 1
            pair_chunks[(a, b)].add(unit["chunk_id"])
    entities = [
        {
            "entity_id": eid,
            "name": names[eid].most_common(1)[0][0],
            "type": types[eid].most_common(1)[0][0],
            "description": None,
            "chunk_ids": sorted(chunks[eid]),
        }
        for eid in sorted(names)
    ]
    relations = [
        {
            "rel_id": relation_id(a, b),
            "src": a,
            "dst": b,
            "description": None,
            "keywords": "co-occurrence",
            "weight": float(w),
            "chunk_ids": sorted(pair_chunks[(a, b)]),
        }
        for (a, b), w in sorted(pair_weight.items())
    ]
    return entities, unit_entity, relations
