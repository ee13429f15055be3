"""Entity resolution: names normalised and merged; co-occurrence relations with added weights;
provenance (chunk ids) kept for every entity and relation."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

import pyarrow as pa

from graphrag_engine.descriptions import SentencePicks, content_words
from graphrag_engine.index.build import Build, Stage
from graphrag_engine.index.extract import summarize_descriptions
from graphrag_engine.index.graphs import build_graphs
from graphrag_engine.models.ner import skip_labels
from graphrag_engine.names import normalize_name
from graphrag_engine.progress import progress
from graphrag_engine.store.schemas import schema_for

LINK_BATCH = 1 << 16
"""unit_entity rows gathered as Python strings before they become one Arrow batch."""
UnitMentions = (
    tuple[str, str, Sequence[tuple[str, str]]] | tuple[str, str, Sequence[tuple[str, str]], str]
)
"""(unit id, chunk id, the unit's (surface, label) mentions[, the unit's text])."""


def entity_id(key: str) -> str:
    """Content-hash id of a normalised entity name."""
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def relation_id(src: str, dst: str) -> str:
    """Id of the (undirected) relation between two entity ids."""
    a, b = sorted((src, dst))
    return hashlib.sha1(f"{a}\x00{b}".encode()).hexdigest()[:16]


def resolve(
    unit_mentions: Iterable[UnitMentions],
    extracted: list[tuple[str, object]] | None = None,
    entity_sentences: int = 0,
    relation_sentences: int = 0,
) -> tuple[list[dict], pa.Table, list[dict]]:
    """(entities, unit_entity, relations) from NER mentions per unit and, optionally, LLM
    extractions per chunk (`(chunk_id, ChunkExtraction)` pairs). The units are read once, as
    they come (a build streams them from its NER cache); unit_entity is a two-column table.

    The name of an entity is its most frequent surface form (ties: the first seen), its type
    the most frequent label, its description the distinct extracted descriptions joined. Two
    entities in the same unit get a co-occurrence relation (weight: shared units); extracted
    relations add their strength to the weight of the same pair and bring descriptions and
    keywords. Every entity and relation keeps the chunk ids it came from.

    Without an LLM description, an entity is described by up to `entity_sentences` of the
    units that mention it and a relation by up to `relation_sentences` of the units where its
    ends co-occur, its keywords then the content words of those (graphrag_engine/descriptions.py);
    that needs the units' texts as the fourth item of `unit_mentions`.
    """
    names: dict[str, Counter] = defaultdict(Counter)
    types: dict[str, Counter] = defaultdict(Counter)
    descriptions: dict[str, list[str]] = defaultdict(list)
    chunks: dict[str, set[str]] = defaultdict(set)
    link_units: list[str] = []  # unit_entity rows not yet in an Arrow batch
    link_entities: list[str] = []
    link_batches: list[pa.RecordBatch] = []
    link_schema = schema_for("unit_entity")

    def seal_links() -> None:  # a batch of links as Arrow columns, no Python string per unit
        link_batches.append(
            pa.RecordBatch.from_arrays(
                [pa.array(link_units, pa.string()), pa.array(link_entities, pa.string())],
                schema=link_schema,
            )
        )
        link_units.clear()
        link_entities.clear()

    id_of: dict[str, str] = {}  # normalised name -> entity id, one string per entity
    weight: Counter = Counter()
    rel_chunks: dict[tuple[str, str], set[str]] = defaultdict(set)
    rel_desc: dict[tuple[str, str], list[str]] = defaultdict(list)
    rel_keys: dict[tuple[str, str], list[str]] = defaultdict(list)
    entity_picks = SentencePicks(entity_sentences)
    relation_picks = SentencePicks(relation_sentences)
    marker = "" if relation_sentences > 0 else "co-occurrence"  # sentences bring keywords

    def mention(surface: str, label: str, chunk_id: str) -> str | None:
        key = normalize_name(surface)
        if len(key) < 2:
            return None
        eid = id_of.get(key)
        if eid is None:
            eid = id_of[key] = entity_id(key)
        names[eid][surface.strip()] += 1
        types[eid][label] += 1
        chunks[eid].add(chunk_id)
        return eid

    def relate(a: str, b: str, w: float, chunk_id: str, desc: str = "", keywords: str = "") -> None:
        if a == b:
            return
        pair = (a, b) if a < b else (b, a)
        weight[pair] += w
        rel_chunks[pair].add(chunk_id)
        if desc and desc not in rel_desc[pair]:
            rel_desc[pair].append(desc)
        for k in (keywords or "").split(","):
            if k.strip() and k.strip() not in rel_keys[pair]:
                rel_keys[pair].append(k.strip())

    for row, (unit_id, chunk_id, found, *text) in enumerate(unit_mentions):
        sentence = text[0] if text else ""
        ids: list[str] = []
        for surface, label in found:
            eid = mention(surface, label, chunk_id)
            if eid is not None and eid not in ids:
                ids.append(eid)
        link_units.extend([unit_id] * len(ids))
        link_entities.extend(ids)
        if len(link_units) >= LINK_BATCH:
            seal_links()
        for eid in ids:
            entity_picks.offer(eid, sentence, len(ids), row)
        for a, b in combinations(sorted(ids), 2):
            relate(a, b, 1.0, chunk_id, keywords=marker)
            relation_picks.offer((a, b), sentence, len(ids), row)
    for chunk_id, ex in extracted or []:
        for name, label, desc in ex.entities:
            eid = mention(name, label, chunk_id)
            if eid is not None and desc and desc not in descriptions[eid]:
                descriptions[eid].append(desc)
        for src, dst, desc, keywords, strength in ex.relations:
            a, b = mention(src, "UNKNOWN", chunk_id), mention(dst, "UNKNOWN", chunk_id)
            if a is not None and b is not None:
                relate(a, b, max(strength, 0.0), chunk_id, desc, keywords)
    entities = []
    for eid in sorted(names):
        described = "\n".join(descriptions[eid])  # an LLM's descriptions win over sentences
        entities.append(
            {
                "sentence_units": [] if described else entity_picks.rows(eid),  # not a column
                "entity_id": eid,
                "name": names[eid].most_common(1)[0][0],
                "type": _best_type(types[eid]),
                "description": described or " ".join(entity_picks.texts(eid)) or None,
                "chunk_ids": sorted(chunks[eid]),
            }
        )
    relations = []
    for (a, b), w in sorted(weight.items()):
        description, keywords, rows = rel_desc[(a, b)], rel_keys[(a, b)], []
        if not description:  # no LLM said what the relation is: the sentences say it
            description, rows = relation_picks.texts((a, b)), relation_picks.rows((a, b))
            ends = (names[a].most_common(1)[0][0], names[b].most_common(1)[0][0])
            keywords = keywords or content_words(description, ends)
        relations.append(
            {
                "sentence_units": rows,  # not a column: what the build's vectors derive from
                "rel_id": relation_id(a, b),
                "src": a,
                "dst": b,
                "description": "\n".join(description) or None,
                "keywords": ", ".join(keywords) or None,
                "weight": float(w),
                "chunk_ids": sorted(rel_chunks[(a, b)]),
            }
        )
    seal_links()
    return entities, pa.Table.from_batches(link_batches, schema=link_schema), relations


def _best_type(counts: Counter) -> str:
    """Most frequent label, preferring a real one over UNKNOWN."""
    known = [(n, t) for t, n in counts.items() if t != "UNKNOWN"]
    return max(known)[1] if known else "UNKNOWN"


def _ner(b: Build) -> dict[str, Any]:
    """Entity mentions of every unit (blocks of units per executor call, cached by text; the
    resolve stage reads them back from the cache a window at a time)."""
    b.models["ner"] = b.executor.ner_model_id
    cache = b.ner_cache()
    cache.tag(b.executor, b.models["ner"], b.unit_texts(), total=b.unit_ids.num_rows)
    return {
        "items": b.unit_ids.num_rows,
        "cached": cache.hits,
        "tagged": cache.misses,
        "backend": b.models["ner"].split(":")[0],
        "worker_processes": getattr(b.executor, "ner_workers", 0),
    }


BAR_STEP = 4096
"""Units resolved between two moves of the resolution bar."""


def _resolve_graphs(b: Build) -> dict[str, Any]:
    """Entity resolution (mentions and extracted triples), then the three graphs."""
    mentions_seen = 0
    model, cache = b.models["ner"], b.ner_cache()
    bar = progress("resolve entities", total=b.unit_ids.num_rows, unit="unit")

    def unit_mentions():  # each unit's mentions, read back from the NER cache a window at a time
        nonlocal mentions_seen
        lo = 0
        for found, texts in zip(cache.mentions(model, b.unit_texts()), b.unit_texts(), strict=True):
            found = skip_labels(found, b.config.graph.ner_skip_labels)
            ids = b.unit_ids.slice(lo, len(found))  # the window's ids, held since the units stage
            lo += len(found)
            mentions_seen += sum(map(len, found))
            rows = zip(*(c.to_pylist() for c in ids.columns), found, texts, strict=True)
            for i, row in enumerate(rows, 1):
                yield row
                if i % BAR_STEP == 0:  # a window holds tens of thousands of units
                    bar.update(BAR_STEP)
            bar.update(len(found) % BAR_STEP)

    g = b.config.graph
    with bar:
        b.entities, unit_entity, b.relations = resolve(
            unit_mentions(), b.extracted, g.entity_sentences, g.relation_sentences
        )
    b.unit_entity = unit_entity
    b.stats["stages"]["ner"]["mentions"] = mentions_seen
    x = b.config.extraction
    if b.extracted is not None and x.summarize_above > 0:
        b.stats["stages"]["extract"]["summarized"] = summarize_descriptions(
            b.llm, b.entities, x.summarize_above
        )
    b.writer.write_table("entities", b.entities)
    b.writer.write_table("unit_entity", unit_entity)
    b.writer.write_table("relations", b.relations)
    graphs, layouts = build_graphs(b.chunks.ids, b.unit_ids, b.entities, unit_entity, b.relations)
    for name, table in graphs.items():
        b.writer.write_table(name, table)
    b.stats["graphs"] = {k: {**v, "edges": graphs[k].num_rows} for k, v in layouts.items()}
    return {"items": len(b.entities), "relations": len(b.relations)}


BUILD_NER = Stage("ner", ("units",), (), _ner)
BUILD_RESOLVE_GRAPHS = Stage(
    "resolve_graphs",
    ("units",),
    ("entities", "unit_entity", "relations", "graph_*"),
    _resolve_graphs,
    uses_llm=True,  # the entity description summaries: their usage is this stage's
)
