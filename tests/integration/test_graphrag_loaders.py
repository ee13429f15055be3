"""The `parquet-graphrag` export read by Microsoft GraphRAG's own query loaders
(`graphrag.query.indexer_adapters`, GraphRAG 3.3.0 from tests/graphrag-loaders.txt, which the
README's test command installs): every table loads, with the index's counts and values, for
the import of GraphRAG's own output and for an engine-built index with communities."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from graphrag_engine.config import IndexConfig
from graphrag_engine.export.formats import export_graph
from graphrag_engine.importers import import_index
from graphrag_engine.store import open_index


def _loaders():
    """GraphRAG's loaders module, or a failure that says how to install it."""
    try:
        from graphrag.query import indexer_adapters
    except ImportError as exc:  # the README's test command installs them: not a skip
        pytest.fail(
            f"GraphRAG's loaders are not importable ({exc}); install them with "
            "`.venv/bin/pip install --no-deps -r tests/graphrag-loaders.txt`"
        )
    return indexer_adapters


@pytest.fixture(scope="module")
def graphrag_import(shared_data, tmp_path_factory) -> Path:
    """GraphRAG's own output imported without vectors (the loaders read tables only)."""
    cfg = IndexConfig()
    cfg.graph.embed = False
    out = tmp_path_factory.mktemp("loaders") / "index"
    import_index(shared_data / "graphrag_output", out, cfg)
    return out


@pytest.mark.parametrize("which", ["graphrag import", "engine-built demo"])
def test_graphrag_loaders_read_every_exported_table(
    which, graphrag_import, demo_reports_index, tmp_path
) -> None:
    """Entities, relationships, text units, communities and reports load through GraphRAG's
    loaders with one object per row, and keep the index's names, sources and report texts."""
    adapters = _loaders()
    root = graphrag_import if which == "graphrag import" else demo_reports_index
    index = open_index(root)
    export_graph(index, "parquet-graphrag", tmp_path / "out", say=lambda _: None)
    df = {t.stem: pd.read_parquet(t) for t in (tmp_path / "out").glob("*.parquet")}

    entities = adapters.read_indexer_entities(df["entities"], df["communities"], None)
    relations = adapters.read_indexer_relationships(df["relationships"])
    units = adapters.read_indexer_text_units(df["text_units"])
    communities = adapters.read_indexer_communities(df["communities"], df["community_reports"])
    reports = adapters.read_indexer_reports(df["community_reports"], df["communities"], None)

    mine = {t: index.table(t).to_pylist() for t in ("entities", "relations", "chunks")}
    mine_comms, mine_reports = index.table("communities"), index.table("reports")
    assert len(entities) == len(mine["entities"]) and len(relations) == len(mine["relations"])
    assert len(units) == len(mine["chunks"])
    assert len(communities) == mine_comms.num_rows and len(reports) == mine_reports.num_rows > 0

    by_id = {e["entity_id"]: e for e in mine["entities"]}
    for entity in entities:  # names, descriptions and sources as the index holds them
        row = by_id[entity.id]
        assert entity.title == row["name"] and entity.description == (row["description"] or "")
        assert sorted(entity.text_unit_ids or []) == sorted(row["chunk_ids"] or [])
    name = {e["entity_id"]: e["name"] for e in mine["entities"]}
    assert sorted((r.source, r.target, r.weight) for r in relations) == sorted(
        (name[r["src"]], name[r["dst"]], float(r["weight"])) for r in mine["relations"]
    )
    text = {c["chunk_id"]: c["text"] for c in mine["chunks"]}
    assert all(u.text == text[u.id] for u in units)
    assert sum(len(u.entity_ids or []) for u in units) == sum(
        len(e["chunk_ids"] or []) for e in mine["entities"]
    )
    levels = sorted(int(c.level) for c in communities)
    assert levels == sorted(mine_comms["level"].to_pylist())
    number = {c.short_id: c for c in communities}  # the hierarchy, as GraphRAG reads it back
    nested = [c for c in communities if str(c.parent) not in ("-1", "None")]
    assert len(nested) == sum(p is not None for p in mine_comms["parent_id"].to_pylist())
    for c in nested:
        parent = number[str(c.parent)]
        assert int(parent.level) == int(c.level) - 1 and c.short_id in map(str, parent.children)
    assert sorted(r.title for r in reports) == sorted(mine_reports["title"].to_pylist())
    for report in reports:  # GraphRAG's findings when the engine holds the report as JSON
        assert report.full_content and report.summary is not None
    if which == "graphrag import":
        held = {json.loads(r["full_text"])["title"] for r in mine_reports.to_pylist()}
        assert {r.title for r in reports} == held
