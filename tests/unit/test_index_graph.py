"""Graph stages of `index` on the demo corpus and real data: units, entities, relations,
graphs, vectors; re-runs and `--add` against a full rebuild; LLM units resumable after a kill."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.cli import main
from graphrag_engine.index.resolve import normalize_name
from graphrag_engine.store import open_index


def test_add_needs_an_index(tmp_path: Path, capsys) -> None:
    assert main(["index", "--demo", "--out", str(tmp_path / "none"), "--add"]) == 2
    assert "holds no index yet" in capsys.readouterr().err


def test_rules_fallback_ner(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("graph:\n  ner: rules\n  embed: false\n")
    assert main(["index", "--demo", "--out", str(tmp_path / "i"), "--config", str(cfg)]) == 0
    idx = open_index(tmp_path / "i")
    assert idx.manifest["models"]["ner"] == "rules:capitalised-sequences"
    names = {normalize_name(n) for n in idx.table("entities")["name"].to_pylist()}
    assert {"hana lirrow", "quillon opera house", "port calloway"} <= names
    assert not idx.has("unit_vectors")


def test_alpha_needs_an_llm(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("graph:\n  alpha: 0.5\n")
    assert main(["index", "--demo", "--out", str(tmp_path / "i"), "--config", str(cfg)]) == 2
    assert "models.llm.backend is 'none'" in capsys.readouterr().err


def test_graph_tables_equal_a_row_by_row_reference() -> None:
    """build_graphs looks ids up column-wise; the same edges as a per-row dict walk."""
    from collections import Counter

    import pyarrow as pa

    from graphrag_engine.index.graphs import build_graphs

    rng = np.random.default_rng(3)
    chunk_ids = [f"c{i}" for i in range(40)]
    units = [{"unit_id": f"u{i}", "chunk_id": f"c{rng.integers(40)}"} for i in range(300)]
    entities = [{"entity_id": f"e{i}"} for i in range(60)]
    links = [
        {"unit_id": f"u{u}", "entity_id": f"e{e}"}
        for u in range(300)
        for e in sorted(set(rng.integers(60, size=rng.integers(0, 4)).tolist()))
    ]
    relations = [
        {"src": "e1", "dst": "e2", "weight": 2.0},
        {"src": "e3", "dst": "e9", "weight": 1.0},
    ]
    graphs, layouts = build_graphs(
        pa.array(chunk_ids),
        pa.Table.from_pylist(units),
        entities,
        pa.Table.from_pylist(links),
        relations,
    )
    c_idx = {c: i for i, c in enumerate(chunk_ids)}
    u_idx = {u["unit_id"]: i for i, u in enumerate(units)}
    e_idx = {e["entity_id"]: i for i, e in enumerate(entities)}
    n_c, n_u = len(chunk_ids), len(units)
    cue = [(c_idx[u["chunk_id"]], n_c + i) for i, u in enumerate(units)] + [
        (n_c + u_idx[r["unit_id"]], n_c + n_u + e_idx[r["entity_id"]]) for r in links
    ]
    assert set(graphs["graph_cue"]["weight"].to_pylist()) == {1.0}
    assert [(r["src"], r["dst"]) for r in graphs["graph_cue"].to_pylist()] == cue
    counts = Counter(
        (c_idx[units[u_idx[r["unit_id"]]]["chunk_id"]], e_idx[r["entity_id"]]) for r in links
    )
    assert graphs["graph_passage_entity"].to_pylist() == [
        {"src": c, "dst": n_c + e, "weight": float(counts[(c, e)])} for c, e in sorted(counts)
    ]
    assert graphs["graph_entity"].to_pylist() == [
        {"src": 1, "dst": 2, "weight": 2.0},
        {"src": 3, "dst": 9, "weight": 1.0},
    ]
    assert layouts["graph_cue"]["nodes"] == n_c + n_u + len(entities)
    with pytest.raises(ValueError, match="1 ids are not among"):
        build_graphs(
            pa.array(chunk_ids),
            pa.Table.from_pylist(units),
            entities,
            pa.Table.from_pylist([{"unit_id": "u-missing", "entity_id": "e1"}]),
            [],
        )
