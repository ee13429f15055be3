"""graph.relation_vectors / graph.unit_vectors: lazy: the build embeds no relation (unit)
texts; the first query that searches them embeds them into the index's embedding cache, later
runs read them back, a read-only index folder embeds them for the run alone, and retrieval
equals an index built with the vectors (the same texts, the same model). Without unit vectors
an entity's vector embeds its text (graph.entity_vectors: text), not its sentences' vectors."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from graphrag_engine.cli import main
from graphrag_engine.config import GraphConfig
from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.clue_rag.method import clue_rag
from graphrag_engine.methods.lightrag import lightrag
from graphrag_engine.models.embed_cache import EMBED_CACHE
from graphrag_engine.names import entity_text
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index


@pytest.fixture(scope="module")
def text_entities_index(tmp_path_factory):
    """The demo indexed with every entity's "name: sentences" embedded as one text."""
    out = tmp_path_factory.mktemp("text-entities")
    (out / "index.yaml").write_text("graph:\n  entity_vectors: text\n")
    config = str(out / "index.yaml")
    assert main(["index", "--demo", "--out", str(out / "index"), "--config", config]) == 0
    return out / "index"


def test_pooled_entity_vectors_embed_each_sentence_once(demo_index, text_entities_index) -> None:
    """The default build embeds names, not "name: sentences" texts: fewer texts, the same
    tables and the same unit and relation vectors; its pooled entity vectors lie close to the
    embedded ones (cosine .96 on average on MuSiQue's train index; bench/descriptions.py)."""
    pooled, text = open_index(demo_index), open_index(text_entities_index)
    for table in ("entities", "relations", "units", "unit_entity"):
        assert pooled.table(table).equals(text.table(table)), table
    synonyms = [i.table("graph_synonym").to_pydict() for i in (pooled, text)]
    assert [s["src"] for s in synonyms] == [synonyms[1]["src"]] * 2
    assert [s["dst"] for s in synonyms] == [synonyms[1]["dst"]] * 2
    # texts embed in other batches (names with units), so vectors move in float noise
    np.testing.assert_allclose(synonyms[0]["weight"], synonyms[1]["weight"], atol=1e-5)
    for table in ("unit_vectors", "relation_vectors", "chunk_vectors"):
        np.testing.assert_allclose(pooled.vectors(table), text.vectors(table), atol=1e-5)
    embed = {i: i.manifest["stats"]["stages"]["embed"] for i in (pooled, text)}
    n = pooled.rows("entities")
    assert embed[pooled]["derived_entity_vectors"] == n
    assert "derived_entity_vectors" not in embed[text]
    assert embed[pooled]["items"] == embed[text]["items"]
    entities = text.table("entities", ["name", "description"]).to_pydict()
    cfg = query_config("naive")
    ctx = QueryContext(text, cfg, text_entities_index.parent / "run")
    expected = ctx.encode_queries(
        [entity_text(*e) for e in zip(entities["name"], entities["description"], strict=True)]
    )
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(text.vectors("entity_vectors"), expected, atol=1e-5)
    cosine = np.sum(np.asarray(pooled.vectors("entity_vectors")) * expected, axis=1)
    assert cosine.mean() > 0.9 and cosine.min() > 0.6
    assert not np.allclose(cosine, 1.0)


def _global_search(index_dir, run_dir):
    cfg = query_config("lightrag")
    cfg.generation.enabled = False
    cfg.options.keywords, cfg.options.mode = "ner", "global"
    ctx = QueryContext(open_index(index_dir), cfg, run_dir)
    questions = load_questions(questions_path())
    return ctx, lightrag(ctx, questions, StageClock())


def _cached_vectors(index_dir) -> int:
    import sqlite3

    with sqlite3.connect(index_dir / EMBED_CACHE) as conn:
        return conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]


@pytest.mark.parametrize("sentences", [True, False], ids=["sentence-described", "embedded"])
def test_lazy_relation_vectors_equal_built_ones(
    demo_index, tmp_path, capsys, monkeypatch, sentences: bool
) -> None:
    """Sentence-described relations (the LLM-free default) get their sentences' mean unit
    vector, embedding nothing; relations without sentences embed their texts once."""
    n = 2 if sentences else 0
    extra = f"  entity_sentences: {n + 1 if n else 0}\n  relation_sentences: {n}\n"
    cfg = tmp_path / "lazy.yaml"
    cfg.write_text("graph:\n  relation_vectors: lazy\n" + extra)
    lazy = tmp_path / "lazy"
    assert main(["index", "--demo", "--out", str(lazy), "--config", str(cfg)]) == 0
    if sentences:  # the defaults: the session's demo index is the build with the vectors
        assert (GraphConfig.entity_sentences, GraphConfig.relation_sentences) == (3, 2)
        reference_dir = demo_index
    else:
        (tmp_path / "built.yaml").write_text("graph:\n" + extra)
        reference_dir = tmp_path / "built"
        built_cfg = str(tmp_path / "built.yaml")
        assert main(["index", "--demo", "--out", str(reference_dir), "--config", built_cfg]) == 0
    built = open_index(reference_dir)
    index = open_index(lazy)
    assert index.has("entity_vectors") and not index.has("relation_vectors")
    n_rel = index.rows("relations")
    assert n_rel == built.rows("relations") > 0
    stages = index.manifest["stats"]["stages"]["embed"]
    assert stages["items"] == built.manifest["stats"]["stages"]["embed"]["items"] - n_rel

    before = _cached_vectors(lazy)
    embedded = 0 if sentences else n_rel
    ctx, first = _global_search(lazy, tmp_path / "run1")
    assert _cached_vectors(lazy) == before + embedded  # embedded once, into the index's cache
    ref_ctx, reference = _global_search(reference_dir, tmp_path / "run0")
    np.testing.assert_allclose(
        ctx.vectors("relation_vectors"), ref_ctx.vectors("relation_vectors"), atol=1e-6
    )
    assert np.array_equal(first.ranking.ids, reference.ranking.ids)
    assert [c.texts() for c in first.contexts] == [c.texts() for c in reference.contexts]

    _, again = _global_search(lazy, tmp_path / "run2")
    assert _cached_vectors(lazy) == before + embedded  # read back, nothing new
    assert np.array_equal(again.ranking.ids, first.ranking.ids)

    # a folder this process cannot write (root writes anyway, so access is what is faked)
    readonly = tmp_path / "readonly"
    shutil.copytree(lazy, readonly)
    (readonly / EMBED_CACHE).unlink()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK and real_access(p, mode))
    capsys.readouterr()
    _, alone = _global_search(readonly, tmp_path / "run3")
    assert ("for this run only" in capsys.readouterr().err) is not sentences
    assert not (readonly / EMBED_CACHE).exists()
    assert np.array_equal(alone.ranking.ids, first.ranking.ids)


def _clue_rag(index_dir, run_dir):
    cfg = query_config("clue")
    cfg.generation.enabled = False
    ctx = QueryContext(open_index(index_dir), cfg, run_dir)
    return ctx, clue_rag(ctx, load_questions(questions_path()), StageClock())


def test_lazy_unit_vectors_equal_built_ones(text_entities_index, tmp_path) -> None:
    """Against the build with unit vectors whose entities also embed their texts: a build
    without unit vectors cannot pool an entity's sentences."""
    cfg = tmp_path / "lazy.yaml"
    cfg.write_text("graph:\n  unit_vectors: lazy\n")
    lazy = tmp_path / "lazy"
    assert main(["index", "--demo", "--out", str(lazy), "--config", str(cfg)]) == 0
    built, index = open_index(text_entities_index), open_index(lazy)
    assert index.has("entity_vectors") and index.has("relation_vectors")
    assert not index.has("unit_vectors")
    n_units = index.rows("units")
    assert n_units == built.rows("units") > 0
    embed = index.manifest["stats"]["stages"]["embed"]
    assert embed["lazy"] == ["unit_vectors"]
    assert embed["items"] == built.manifest["stats"]["stages"]["embed"]["items"] - n_units

    before = _cached_vectors(lazy)
    ctx, first = _clue_rag(lazy, tmp_path / "run1")
    assert _cached_vectors(lazy) == before + n_units
    ref_ctx, reference = _clue_rag(text_entities_index, tmp_path / "run0")
    np.testing.assert_allclose(ctx.unit_vectors, ref_ctx.unit_vectors, atol=1e-6)
    assert np.array_equal(first.ranking.ids, reference.ranking.ids)
    np.testing.assert_allclose(first.ranking.scores, reference.ranking.scores, atol=1e-5)
    assert first.extras == reference.extras
    _, again = _clue_rag(lazy, tmp_path / "run2")
    assert _cached_vectors(lazy) == before + n_units
    assert np.array_equal(again.ranking.ids, first.ranking.ids)
