"""An LLM-free index of real data gives its entities and relations text: every relation is
described by sentences of its units that name both its ends, its vector is their units' mean
vector, entities are described by sentences naming them and their vectors pool their names'
and those sentences' vectors, and synonym edges join only names that embed within the
threshold."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.descriptions import SentencePicks
from graphrag_engine.methods import query_config
from graphrag_engine.names import normalize_name
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.lazy_vectors import _sentence_rows
from graphrag_engine.store import open_index

SENTENCES = {"entity_sentences": 3, "relation_sentences": 2, "synonym_threshold": 0.8}
"""The settings under test: the defaults, so the session's MuSiQue subset index has them."""


@pytest.fixture(scope="module")
def index(musique_subset: dict):
    """The MuSiQue subset indexed with sentence descriptions and synonym edges (the defaults:
    the session's build of the subset, checked to carry them)."""
    idx = open_index(musique_subset["index"])
    graph = idx.manifest["config"]["graph"]
    assert {k: graph[k] for k in SENTENCES} == SENTENCES
    return idx


def test_relations_are_described_by_sentences_naming_both_ends(index) -> None:
    entities = index.table("entities", ["entity_id", "name", "description"]).to_pydict()
    name = dict(zip(entities["entity_id"], entities["name"], strict=True))
    rels = index.table("relations", ["src", "dst", "description", "keywords"]).to_pydict()
    sentences = set(index.table("units", ["text"]).column("text").to_pylist())
    clipped = {" ".join(s.split()) for s in sentences}
    assert len(rels["src"]) > 1000
    both = total = 0
    for src, dst, desc, keys in zip(*rels.values(), strict=True):
        parts = desc.split("\n")
        assert 1 <= len(parts) <= 2
        for part in parts:
            assert part in clipped or part.endswith(" ...")
            text = normalize_name(part)
            both += normalize_name(name[src]) in text and normalize_name(name[dst]) in text
            total += 1
        assert keys != "co-occurrence"
    assert both >= 0.8 * total  # 84% here: a name's other surface forms make up the rest
    described = [d for d in entities["description"] if d]
    assert len(described) == len(entities["entity_id"])
    # an entity's description mentions it (names are resolved case- and article-insensitively)
    hits = sum(
        normalize_name(n) in normalize_name(d)
        for n, d in zip(entities["name"], entities["description"], strict=True)
    )
    assert hits >= 0.9 * len(described)


def test_relation_vectors_are_their_sentences_mean_unit_vectors(index, tmp_path) -> None:
    ctx = QueryContext(index, query_config("naive"), tmp_path)
    rows = _sentence_rows(ctx.index)  # the build's picks, replayed from the tables
    assert sum(bool(r) for r in rows) == len(rows)
    units, rels = ctx.unit_vectors, ctx.vectors("relation_vectors")
    for i in range(0, len(rows), max(1, len(rows) // 200)):
        mean = units[rows[i]].mean(axis=0)
        np.testing.assert_allclose(rels[i], mean / np.linalg.norm(mean), atol=1e-5)


def test_entity_vectors_pool_their_name_and_sentences(index, tmp_path) -> None:
    """Each entity's vector is its name's vector and its sentences' unit vectors summed, each
    weighted by its characters (a sentence's at most 300), then normalised: replayed here
    from the tables and the embedder, not from the build's code."""
    ctx = QueryContext(index, query_config("naive"), tmp_path)
    units = index.table("units", ["unit_id", "text"]).to_pydict()
    links = index.table("unit_entity").to_pydict()
    named: dict[str, list[str]] = {}
    for unit, entity in zip(links["unit_id"], links["entity_id"], strict=True):
        named.setdefault(unit, []).append(entity)
    picks = SentencePicks(SENTENCES["entity_sentences"])
    for row, (unit, text) in enumerate(zip(units["unit_id"], units["text"], strict=True)):
        for entity in named.get(unit, []):
            picks.offer(entity, text, len(named[unit]), row)
    entities = index.table("entities", ["entity_id", "name", "description"]).to_pydict()
    stats = index.manifest["stats"]["stages"]["embed"]
    assert stats["derived_entity_vectors"] == len(entities["entity_id"])
    sample = range(0, len(entities["entity_id"]), max(1, len(entities["entity_id"]) // 200))
    names = [entities["name"][i] for i in sample]
    name_vectors = ctx.encode_queries(names)
    for i, name, name_vector in zip(sample, names, name_vectors, strict=True):
        entity = entities["entity_id"][i]
        assert entities["description"][i] == " ".join(picks.texts(entity))
        pooled = (len(name) + 1) * name_vector / np.linalg.norm(name_vector)
        for row in picks.rows(entity):
            pooled += min(len(units["text"][row]), 300) * ctx.unit_vectors[row]
        np.testing.assert_allclose(
            ctx.entity_vectors[i], pooled / np.linalg.norm(pooled), atol=1e-5
        )


def test_synonym_edges_join_close_names_only(index, tmp_path) -> None:
    ctx = QueryContext(index, query_config("naive"), tmp_path)
    edges = index.table("graph_synonym").to_pydict()
    names = ctx.entities["name"]
    assert 0 < len(edges["src"]) < len(names)
    vecs = ctx.encode_queries([names[i] for i in edges["src"]] + [names[i] for i in edges["dst"]])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    n = len(edges["src"])
    cos = np.sum(vecs[:n] * vecs[n:], axis=1)
    np.testing.assert_allclose(cos, edges["weight"], atol=1e-4)
    assert np.all(cos >= 0.8 - 1e-4)
