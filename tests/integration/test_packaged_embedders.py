"""Packaged embedders and embedder prefixes: all-mpnet-base-v2 joined from its five part
packages into the model cache once, offline; a query prefix and a passage prefix reach the texts
each side embeds, are part of the embedder's identity, and travel with the index to its
queries."""

from __future__ import annotations

import dataclasses
import time
from importlib import metadata

import numpy as np
import pytest

from graphrag_engine.config.sections import EmbedderConfig
from graphrag_engine.models import make_embedder
from graphrag_engine.models.packaged import MPNET, packaged_mpnet_path
from graphrag_engine.retrieve.context import embedder_config


def _mpnet_installed() -> bool:
    try:
        metadata.distribution(f"{MPNET}-pypi-part-001")
    except metadata.PackageNotFoundError:
        return False
    return True


def test_prefixes_reach_each_side_and_name_the_embedder(minilm) -> None:
    plain = make_embedder(EmbedderConfig())
    prefixed = make_embedder(EmbedderConfig(query_prefix="query: ", passage_prefix="passage: "))
    texts = ["Who founded the Hanseatic League?", "Lübeck led the league's diets."]
    assert np.allclose(prefixed.encode(texts), minilm.encode([f"passage: {t}" for t in texts]))
    assert np.allclose(
        prefixed.encode_queries(texts), minilm.encode([f"query: {t}" for t in texts])
    )
    blocks = np.zeros((len(texts), prefixed.dim), dtype=np.float32)
    for positions, vectors in prefixed.encode_blocks(texts):  # the index's path: prefixed too
        blocks[list(positions)] = vectors
    assert np.allclose(blocks, minilm.encode([f"passage: {t}" for t in texts]))
    assert not np.allclose(prefixed.encode(texts), plain.encode(texts))
    assert prefixed.model_id != plain.model_id  # cached vectors of one never serve the other
    other = make_embedder(EmbedderConfig(query_prefix="q: ", passage_prefix="passage: "))
    assert other.model_id != prefixed.model_id
    assert prefixed.dim == plain.dim


def test_a_query_embeds_with_the_prefixes_its_index_was_built_with(demo_index) -> None:
    from graphrag_engine.methods import query_config
    from graphrag_engine.store import open_index

    index = open_index(demo_index)
    built = {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2"}
    built |= {"query_prefix": "query: ", "passage_prefix": "passage: "}
    config = dict(index.manifest.get("config") or {})
    config["models"] = {**config.get("models", {}), "embedder": built}
    index.manifest = {**index.manifest, "config": config}  # this object's copy only
    cfg = query_config("naive")
    got = embedder_config(cfg, index)
    assert (got.query_prefix, got.passage_prefix) == ("query: ", "passage: ")
    cfg.models.embedder = dataclasses.replace(cfg.models.embedder, query_prefix="x: ")
    assert embedder_config(cfg, index).query_prefix == "x: "  # a query's own config wins


@pytest.mark.skipif(not _mpnet_installed(), reason="the mpnet extra is not installed")
def test_mpnet_is_joined_once_and_embeds_offline(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GRAPHRAG_MODEL_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = packaged_mpnet_path()
    assert (tmp_path / folder.split("/")[-1] / "model.safetensors").stat().st_size > 4e8
    started = time.perf_counter()
    assert packaged_mpnet_path() == folder  # found, not joined again
    assert time.perf_counter() - started < 1.0
    assert [p.name for p in tmp_path.iterdir()] == [folder.split("/")[-1]]  # no leftovers
    embedder = make_embedder(EmbedderConfig(model=MPNET))
    assert embedder.model_id == f"sentence-transformers:{MPNET}" and embedder.dim == 768
    v = embedder.encode(["The cat sat on the mat.", "A feline rested on a rug.", "Bonds fell."])
    assert v @ v[0] == pytest.approx([1.0, v[1] @ v[0], v[2] @ v[0]])
    assert v[1] @ v[0] > 0.5 > v[2] @ v[0]
