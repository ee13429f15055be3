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
