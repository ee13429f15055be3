"""The embed stage: vectors of units, entities and relations, each corpus sentence embedded once.

On an LLM-free index the units are the corpus's sentences, and an entity or a relation is
described by some of them (graphrag_engine/descriptions.py). Embedding each description as one
text would embed the same sentences again inside every entity and relation that names them: on
2Wiki that was most of a build's time. So where the unit vectors are built too, a
sentence-described relation's vector is the mean of its sentences' unit vectors, and a
sentence-described entity's vector pools its name's vector with theirs (`graph.entity_vectors:
pooled`); only names, units and an LLM's descriptions go through the embedder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from graphrag_engine.descriptions import entity_pool, sentence_mean
from graphrag_engine.index.build import Build, Stage
from graphrag_engine.models.text_cache import WINDOW, Windows
from graphrag_engine.names import VECTOR_TABLE_KINDS, entity_text, relation_text

TextWindows = tuple[int, Callable[[], Windows]]
"""A vector table's rows and what reads its texts, a window at a time (called once per pass)."""
TextOf = Callable[[dict], "str | None"]
"""What a row of a table embeds, or None where nothing of it is embedded."""
Pool = Callable[[np.ndarray, np.ndarray, dict], np.ndarray]
"""(the row's embedded text's vector, or zeros; the unit vectors; the row) -> its vector."""


def embed_stage(b: Build) -> dict[str, Any]:
    """Vectors of units, entities ("name: description") and relations ("src - dst:
    description"), but not of a table the config leaves lazy (a query embeds it when it first
    asks). With the unit vectors built here, a sentence-described relation's vector is derived
    from its sentences' unit vectors, and so is a sentence-described entity's (with its name's)
    unless `graph.entity_vectors` is text."""
    cache, g = b.cache, b.config.graph
    hits0, miss0 = cache.hits, cache.misses
    units_here = g.unit_vectors == "index"
    pool_entities = (
        units_here
        and g.entity_vectors == "pooled"
        and any(e.get("sentence_units") for e in b.entities)
    )
    pool_relations = (
        units_here
        and g.relation_vectors == "index"
        and any(r.get("sentence_units") for r in b.relations)
    )
    name_of = {e["entity_id"]: e["name"] for e in b.entities}

    def entity_embeds(e: dict) -> str:  # its name alone where its sentences' vectors join it
        if pool_entities and e.get("sentence_units"):
            return e["name"]
        return entity_text(e["name"], e["description"])

    def relation_embeds(r: dict) -> str | None:  # none where its sentences' mean is its vector
        if pool_relations and r.get("sentence_units"):
            return None
        return relation_text(name_of[r["src"]], name_of[r["dst"]], r["description"])

    tables = {
        "unit_vectors": (b.unit_ids.num_rows, b.unit_texts) if units_here else None,
        "entity_vectors": _texts(b.entities, entity_embeds) if not pool_entities else None,
        "relation_vectors": _texts(b.relations, relation_embeds)
        if g.relation_vectors == "index" and not pool_relations
        else None,
    }
    built = {name: texts for name, texts in tables.items() if texts is not None}
    derived: dict[str, tuple[list[dict], TextOf, Pool]] = {}
    if pool_entities:
        chars = np.fromiter((len(t) for w in b.unit_texts() for t in w), dtype=np.int64)
        derived["entity_vectors"] = (
            b.entities,
            entity_embeds,
            lambda name_vector, units, e: entity_pool(
                name_vector, e["name"], units, e["sentence_units"], chars
            ),
        )
    if pool_relations:
        derived["relation_vectors"] = (b.relations, relation_embeds, _relation_pool)
    write_vectors(b, built, [_texts(rows, text_of) for rows, text_of, _ in derived.values()])
    for name, (rows, text_of, pool) in derived.items():
        _derived_vectors(b, name, rows, text_of, pool)
    return {
        "items": sum(n for n, _ in built.values()) + sum(len(r) for r, _, _ in derived.values()),
        "cached": cache.hits - hits0,
        "embedded": cache.misses - miss0,
        **{
            f"derived_{name}": sum(bool(r.get("sentence_units")) for r in rows)
            for name, (rows, _, _) in derived.items()
        },
        "lazy": [name for name, texts in tables.items() if texts is None and name not in derived],
    }


def _relation_pool(_: np.ndarray, units: np.ndarray, relation: dict) -> np.ndarray:
    """A sentence-described relation: its sentences' mean (the lazy vectors' rule too)."""
    return sentence_mean(units, relation["sentence_units"])


def _texts(rows: list[dict], text_of: TextOf) -> TextWindows:
    """What the rows embed (those with a text), made WINDOW rows at a time as they are read."""

    def read() -> Iterator[list[str]]:
        for lo in range(0, len(rows), WINDOW):
            texts = [text_of(row) for row in rows[lo : lo + WINDOW]]
            yield [t for t in texts if t is not None]

    return sum(text_of(row) is not None for row in rows), read


def _derived_vectors(b: Build, name: str, rows: list[dict], text_of: TextOf, pool: Pool) -> None:
    """Table `name`, WINDOW rows at a time: each row's embedded text's cached vector, pooled
    with its sentences' unit vectors where it has sentences."""
    units = b.writer.staged_vectors("unit_vectors")
    model = b.embedder.model_id
    with b.writer.vector_sink(name, len(rows), model) as sink:
        for lo in range(0, len(rows), WINDOW):
            part = rows[lo : lo + WINDOW]
            texts = [text_of(row) for row in part]
            block = np.zeros((len(part), units.shape[1]), dtype=np.float32)
            at = [i for i, t in enumerate(texts) if t is not None]
            if at:
                wanted = [texts[i] for i in at]
                block[at] = np.stack(next(b.cache.stored(model, iter([wanted]))))
            for i, row in enumerate(part):
                if row.get("sentence_units"):
                    block[i] = pool(block[i], units, row)
            sink.append(block)


def write_vectors(
    b: Build, tables: dict[str, TextWindows], also: list[TextWindows] | None = None
) -> None:
    """Embed the texts of every table (and `also`'s, into the cache only) in one pass (one fill,
    so one pipeline and model load on Ray for a corpus under PENDING_CHARS), then stream each
    table's vectors from the cache into its file, a window at a time: no build holds a whole
    vector table or its texts."""
    label = "+".join(VECTOR_TABLE_KINDS[n] for n in tables) or "names"
    passes = [*tables.values(), *(also or [])]
    every_window: Iterator[list[str]] = (w for _, texts in passes for w in texts())
    b.cache.embed(b.embedder, every_window, label, total=sum(n for n, _ in passes))
    for name, (rows, texts) in tables.items():
        with b.writer.vector_sink(name, rows, b.embedder.model_id) as sink:
            b.cache.stream(b.embedder.model_id, texts(), sink)


def _embed_chunks(b: Build) -> dict[str, Any]:
    """Chunk vectors (also the knapsack's similarity values)."""
    if b.embedder is not None:
        write_vectors(b, {"chunk_vectors": (len(b.chunks), b.chunks.titled)})
        if b.config.graph.alpha > 0:  # the knapsack reads them, memory-mapped
            b.chunk_vecs = b.writer.staged_vectors("chunk_vectors")
    cache = b.cache
    return {
        "items": len(b.chunks),
        "cached": cache.hits if cache else 0,
        "embedded": cache.misses if cache else 0,
        "model_calls": int(bool(cache and cache.misses)),
    }


BUILD_EMBED_CHUNKS = Stage("embed_chunks", ("chunks",), ("chunk_vectors",), _embed_chunks)
BUILD_EMBED = Stage(
    "embed",
    ("units", "entities", "relations"),
    ("unit_vectors", "entity_vectors", "relation_vectors"),
    embed_stage,
    enabled=lambda cfg: cfg.graph.embed,
)
