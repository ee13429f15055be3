"""Vector tables an index left lazy (`graph.unit_vectors` / `graph.relation_vectors: lazy`):
embedded at the first query run that reads them, through the embedding cache beside the index,
relation vectors from their sentences' unit vectors where the build described them so."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from graphrag_engine.descriptions import relation_picks, sentence_mean
from graphrag_engine.models.embed import Embedder
from graphrag_engine.models.embed_cache import EMBED_CACHE, EmbeddingCache
from graphrag_engine.names import VECTOR_TABLE_KINDS, relation_text
from graphrag_engine.store.index_store import Index, built_config

log = logging.getLogger(__name__)


def _relation_texts(index: Index) -> list[str]:
    """Each relation's embedded text, in relations table order."""
    names = index.table("entities", ["entity_id", "name"]).to_pydict()
    name_of = dict(zip(names["entity_id"], names["name"], strict=True))
    rels = index.table("relations", ["src", "dst", "description"]).to_pydict()
    return [
        relation_text(name_of[s], name_of[d], desc)
        for s, d, desc in zip(rels["src"], rels["dst"], rels["description"], strict=True)
    ]


def _unit_texts(index: Index) -> list[str]:
    """Each knowledge unit's text, in units table order."""
    return index.table("units", ["text"]).column("text").to_pylist()


LAZY_TEXTS: dict[str, Callable[[Index], list[str]]] = {
    "relation_vectors": _relation_texts,
    "unit_vectors": _unit_texts,
}
"""The vector tables an index may leave lazy (config key = table name), and their texts."""


def lazy_vectors(
    index: Index, name: str, embedder: Embedder, unit_vectors: Callable[[], np.ndarray]
) -> np.ndarray:
    """A vector table the index left lazy (graph.unit_vectors / graph.relation_vectors:
    lazy), embedded now in its table's row order through the embedding cache beside the
    index, so only the first run pays; an index folder this process cannot write embeds
    them for this run alone. Relation vectors the build described by sentences are those
    sentences' mean unit vector (`unit_vectors()`, read only then)."""
    texts = LAZY_TEXTS[name](index)
    rows = _sentence_rows(index) if name == "relation_vectors" else []
    if not any(rows):
        return _embed(index, embedder, name, texts)
    embedded = [i for i, r in enumerate(rows) if not r]
    units = unit_vectors()
    out = np.zeros((len(texts), units.shape[1]), dtype=np.float32)
    if embedded:
        out[embedded] = _embed(index, embedder, name, [texts[i] for i in embedded])
    for i, r in enumerate(rows):
        if r:
            out[i] = sentence_mean(units, r)
    return out


def _embed(index: Index, embedder: Embedder, name: str, texts: list[str]) -> np.ndarray:
    """Vectors of `texts` through the embedding cache beside the index (for this run alone
    where the folder is read-only)."""
    kinds = VECTOR_TABLE_KINDS[name]
    root = Path(index.root)
    if not os.access(root, os.W_OK):
        log.warning(
            f"{root}: {name} are lazy and the folder is read-only; embedding "
            f"{len(texts)} {kinds} for this run only"
        )
        return np.asarray(embedder.encode(texts), dtype=np.float32)
    return EmbeddingCache(root / EMBED_CACHE).encode(embedder, texts, kinds)


def _sentence_rows(index: Index) -> list[list[int]]:
    """Per relation, the unit rows of the sentences that describe it (empty where an LLM
    described it, or the index kept no sentences): the build's picks, replayed."""
    k = int(built_config(index, "graph").get("relation_sentences", 0) or 0)
    rels = index.table("relations", ["src", "dst", "description"]).to_pydict()
    if k <= 0:
        return [[] for _ in rels["src"]]
    units = index.table("units", ["unit_id", "text"]).to_pydict()
    links = index.table("unit_entity").to_pydict()
    named: dict[str, list[str]] = {}
    for unit, entity in zip(links["unit_id"], links["entity_id"], strict=True):
        named.setdefault(unit, []).append(entity)
    picks = relation_picks(
        ((t, named.get(u, [])) for u, t in zip(units["unit_id"], units["text"], strict=True)),
        k,
    )
    rows = []
    for src, dst, desc in zip(rels["src"], rels["dst"], rels["description"], strict=True):
        texts = picks.texts((src, dst))
        rows.append(picks.rows((src, dst)) if texts and desc == "\n".join(texts) else [])
    return rows
