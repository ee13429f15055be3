"""`graphrag-engine export`: the entity graph read back by networkx (GraphML, GEXF) equals the
index's entities and relations; Neo4j CSV and GraphRAG Parquet tables hold the same graph and
the communities with their reports."""

from __future__ import annotations

import csv
from pathlib import Path

import networkx as nx
import pyarrow.parquet as pq
import pytest

from graphrag_engine.cli import main
from graphrag_engine.store import open_index


def _graph(index: Path) -> tuple[dict, list]:
    ix = open_index(index)
    return (
        {e["entity_id"]: e for e in ix.table("entities").to_pylist()},
        ix.table("relations").to_pylist(),
    )


@pytest.mark.parametrize("fmt", ["graphml", "gexf"])
def test_graphml_and_gexf_read_back_by_networkx(demo_index: Path, tmp_path: Path, fmt: str):
    entities, relations = _graph(demo_index)
    assert main(["export", str(demo_index), "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
    path = tmp_path / fmt / f"graph.{fmt}"
    g = nx.read_graphml(path) if fmt == "graphml" else nx.read_gexf(path)
    assert not g.is_directed()
    assert set(g.nodes) == set(entities)
    expect = {frozenset((r["src"], r["dst"])): r["weight"] for r in relations}
    assert {frozenset(e) for e in g.edges} == set(expect)
    for u, v, data in g.edges(data=True):
        assert float(data["weight"]) == pytest.approx(expect[frozenset((u, v))])
    some = next(iter(entities.values()))
    label = g.nodes[some["entity_id"]].get("name", g.nodes[some["entity_id"]].get("label"))
    assert label == some["name"] and g.nodes[some["entity_id"]]["type"] == some["type"]


def test_neo4j_csv_and_graphrag_parquet_hold_graph_and_communities(
    demo_reports_index: Path, tmp_path: Path
) -> None:
    entities, relations = _graph(demo_reports_index)
    ix = open_index(demo_reports_index)
    communities = ix.table("communities").to_pylist()
    reports = ix.table("reports").to_pylist()
    assert communities and reports
    neo = tmp_path / "neo4j"
    assert (
        main(["export", str(demo_reports_index), "--format", "neo4j-csv", "--out", str(neo)]) == 0
    )
    nodes = list(csv.DictReader((neo / "entities.csv").open()))
    assert {n["entityId:ID(Entity)"] for n in nodes} == set(entities)
    rels = list(csv.DictReader((neo / "relations.csv").open()))
    assert sorted((r[":START_ID(Entity)"], r[":END_ID(Entity)"]) for r in rels) == sorted(
        (r["src"], r["dst"]) for r in relations
    )
    links = list(csv.DictReader((neo / "in_community.csv").open()))
    assert len(links) == sum(len(c["entity_ids"]) for c in communities)

    out = tmp_path / "graphrag"
    assert (
        main(["export", str(demo_reports_index), "--format", "parquet-graphrag", "--out", str(out)])
        == 0
    )
    ents = pq.read_table(out / "entities.parquet").to_pylist()
    assert {e["id"] for e in ents} == set(entities)
    title = {e["id"]: e["title"] for e in ents}
    rel = pq.read_table(out / "relationships.parquet").to_pylist()
    assert sorted((r["source"], r["target"]) for r in rel) == sorted(
        (title[r["src"]], title[r["dst"]]) for r in relations
    )
    for e in ents:  # degree = relations touching the entity
        assert e["degree"] == sum(e["id"] in (r["src"], r["dst"]) for r in relations)
    comm = pq.read_table(out / "communities.parquet").to_pylist()
    assert len(comm) == len(communities)
    by_number = {c["community"]: c for c in comm}
    for c in comm:  # parents one level up, children listed back
        if c["parent"] != -1:
            parent = by_number[c["parent"]]
            assert parent["level"] == c["level"] - 1 and c["community"] in parent["children"]
            assert set(c["entity_ids"]) <= set(parent["entity_ids"])
    rep = pq.read_table(out / "community_reports.parquet").to_pylist()
    assert sorted(r["title"] for r in rep) == sorted(r["title"] for r in reports)
    units = pq.read_table(out / "text_units.parquet")
    assert units.num_rows == ix.table("chunks").num_rows


def test_export_of_an_index_without_entities_says_how_to_build_one(tmp_path: Path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "Ann Lee met Bo Chan in Paris."}\n')
    cfg = tmp_path / "i.yaml"
    cfg.write_text("graph:\n  enabled: false\n")
    assert main(["index", str(corpus), "--out", str(tmp_path / "idx"), "--config", str(cfg)]) == 0
    args = ["export", str(tmp_path / "idx"), "--format", "graphml", "--out", str(tmp_path / "x")]
    assert main(args) == 2
    assert "graph.enabled: true" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_export_never_removes_what_it_did_not_write(
    demo_index: Path, tmp_path: Path, capsys, monkeypatch
):
    """`--out` that is the index, lies inside it or holds other files is refused (exit 2,
    nothing removed); an earlier export is replaced; `--replace` names what goes first."""

    def files() -> list[Path]:  # SQLite's -wal/-shm come and go with its connections
        return sorted(p for p in demo_index.rglob("*") if not p.name.endswith(("-wal", "-shm")))

    before = files()
    export = ["export", str(demo_index), "--format", "graphml", "--out"]
    for out in (demo_index, demo_index / "graph", demo_index.parent):
        assert main([*export, str(out)]) == 2
        assert "index" in capsys.readouterr().err
    assert files() == before
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    assert main([*export, str(project)]) == 2
    err = capsys.readouterr().err
    assert "notes.txt" in err and "--replace" in err
    assert (project / "notes.txt").read_text() == "mine"
    fresh = tmp_path / "fresh"
    assert main([*export, str(fresh)]) == 0
    assert main([*export, str(fresh)]) == 0  # an earlier export is replaced
    assert sorted(p.name for p in fresh.iterdir()) == [
        ".graphrag-engine-export.json",
        "graph.graphml",
    ]
    (fresh / "added.txt").write_text("a user's file")
    assert main([*export, str(fresh)]) == 2  # no longer only what the export wrote
    capsys.readouterr()
    assert main([*export, str(project), "--replace"]) == 0
    assert "notes.txt" in capsys.readouterr().out
    assert not (project / "notes.txt").exists() and (project / "graph.graphml").exists()
    here = tmp_path / "here"  # `--out .`: the working folder, checked like any other
    here.mkdir()
    monkeypatch.chdir(here)
    assert main([*export, "."]) == 0 and (here / "graph.graphml").exists()
    assert main([*export, "."]) == 0  # its own earlier export
    monkeypatch.chdir(project.parent)
    (tmp_path / "loose.txt").write_text("a user's file beside the folders")
    assert main([*export, "."]) == 2  # a folder of other things


def test_exports_of_control_characters_are_well_formed(demo_index: Path, tmp_path: Path):
    """Entity and relation text holding control characters, NUL and a lone surrogate still
    exports GraphML and GEXF that XML parsers (and networkx) read."""
    import xml.etree.ElementTree as ET

    from graphrag_engine.export.formats import WRITERS, graph_tables

    ix = open_index(demo_index)
    tables = graph_tables(ix)
    tables["entities"][0]["description"] = "bell\x07 nul\x00 tab\t ok \ud800 end"
    tables["entities"][0]["name"] = "form\x0cfeed"
    tables["relations"][0]["description"] = "esc\x1b[31m red"
    for fmt, read in (("graphml", nx.read_graphml), ("gexf", nx.read_gexf)):
        out = tmp_path / fmt
        out.mkdir()
        WRITERS[fmt](tables, ix, out)
        path = out / f"graph.{fmt}"
        ET.parse(path)  # well-formed XML
        g = read(path)
        node = g.nodes[tables["entities"][0]["entity_id"]]
        assert node["description"] == "bell\ufffd nul\ufffd tab\t ok \ufffd end"
