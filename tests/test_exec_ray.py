"""The Ray executor on a real local Ray cluster (2 CPUs) builds the same index as local."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.cli import main
from engine.store import open_index

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TABLES = [
    "documents",
    "chunks",
    "units",
    "entities",
    "relations",
    "unit_entity",
    "graph_cue",
    "graph_entity",
]


def test_ray_index_equals_local(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    local, distributed = tmp_path / "local", tmp_path / "ray"
    assert main(["index", "--demo", "--out", str(local)]) == 0
    assert (
        main(
            [
                "index",
                "--demo",
                "--out",
                str(distributed),
                "--executor",
                "ray",
                "--address",
                "local",
            ]
        )
        == 0
    )
    a, b = open_index(local), open_index(distributed)
    assert b.manifest["stats"]["executor"] == "ray" and a.manifest["stats"]["executor"] == "local"
    for t in TABLES:
        assert a.table(t).equals(b.table(t)), t
    for v in ("chunk_vectors", "unit_vectors", "entity_vectors", "relation_vectors"):
        np.testing.assert_allclose(a.vectors(v), b.vectors(v), atol=1e-5)


def test_llm_engines_in_ray_actors_match_local(tmp_path: Path) -> None:
    """With the transformers backend, each Ray actor holds its own SmolLM2; the shards of a
    batch are answered in parallel and the extraction equals the in-process one."""
    pytest.importorskip("ray")
    from engine.demo import corpus_path

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(corpus_path().read_text().splitlines()[:4]) + "\n")
    cfg = tmp_path / "x.yaml"
    cfg.write_text(
        "graph:\n  embed: false\nextraction:\n  enabled: true\n  gleaning: 0\n  max_tokens: 32\n"
        "  retries: 0\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 4\n"
    )
    local, distributed = tmp_path / "local", tmp_path / "ray"
    assert main(["index", str(corpus), "--out", str(local), "--config", str(cfg)]) == 0
    assert (
        main(
            [
                "index",
                str(corpus),
                "--out",
                str(distributed),
                "--config",
                str(cfg),
                "--executor",
                "ray",
            ]
        )
        == 0
    )
    a, b = open_index(local), open_index(distributed)
    sa, sb = a.manifest["stats"]["stages"]["extract"], b.manifest["stats"]["stages"]["extract"]
    assert sb["model_calls"] == sa["model_calls"] == 4
    for t in ("entities", "relations"):
        assert a.table(t).equals(b.table(t)), t
