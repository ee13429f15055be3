"""`graphrag-engine import` of Microsoft GraphRAG's own index output (../shared/data/graphrag_output:
GraphRAG 3.1.2 over *A Christmas Carol*, LLM-written descriptions and reports), its 1.x file
layout, bad input, and the export -> import -> export round trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from graphrag_engine.cli import main
from graphrag_engine.export.graphrag import SCHEMAS, SCHEMAS_1X
from graphrag_engine.importers import import_index
from graphrag_engine.index.resolve import entity_id
from graphrag_engine.names import normalize_name
from graphrag_engine.store import open_index
from tests.graphrag_import import no_vectors

TABLES = tuple(SCHEMAS)


@pytest.fixture(scope="module")
def source(graphrag_output) -> Path:
    """GraphRAG's own output folder (tests/conftest.py)."""
    return graphrag_output


@pytest.fixture(scope="module")
def imported(graphrag_import) -> Path:
    """GraphRAG's output imported once per session through the CLI (tests/conftest.py)."""
    return graphrag_import


def _rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_graphrag_output_keeps_its_llm_graph_and_reports(imported, source, capsys) -> None:
    """Text units become chunks; entities keep their descriptions and sources, relations their
    weights and descriptions, communities their levels and parents, reports title, summary,
    rating and findings; the manifest names the source and the hash of every file."""
    index = open_index(imported)
    src_units = _rows(source / "text_units.parquet")
    src_entities = _rows(source / "entities.parquet")
    src_rels = _rows(source / "relationships.parquet")
    src_comms = _rows(source / "communities.parquet")
    src_reports = _rows(source / "community_reports.parquet")

    chunks = index.table("chunks").to_pylist()
    assert [c["text"] for c in chunks] == [u["text"] for u in src_units]
    chunk_of = {u["id"]: c["chunk_id"] for u, c in zip(src_units, chunks, strict=True)}

    entities = {e["entity_id"]: e for e in index.table("entities").to_pylist()}
    for e in src_entities:  # every entity, its description and its sources
        mine = entities[entity_id(normalize_name(e["title"]))]
        assert e["description"] in mine["description"]
        assert {chunk_of[u] for u in e["text_unit_ids"]} <= set(mine["chunk_ids"])
    relations = index.table("relations").to_pylist()
    assert sum(r["weight"] for r in relations) == pytest.approx(sum(r["weight"] for r in src_rels))
    dickens = entities[entity_id("charles dickens")]
    carol = entities[entity_id("christmas carol")]
    pair = [
        r for r in relations if {r["src"], r["dst"]} == {dickens["entity_id"], carol["entity_id"]}
    ]
    assert len(pair) == 1 and "author" in pair[0]["description"]

    comms = index.table("communities").to_pylist()
    assert len(comms) == len(src_comms) == 122
    level_of = {c["community_id"]: c["level"] for c in comms}
    assert sorted(level_of.values()) == sorted(c["level"] for c in src_comms)
    roots = [c for c in comms if c["parent_id"] is None]
    assert len(roots) == sum(1 for c in src_comms if c["parent"] == -1)
    assert all(level_of[c["parent_id"]] == c["level"] - 1 for c in comms if c["parent_id"])

    reports = index.table("reports").to_pylist()  # in the source's order (titles repeat)
    assert len(reports) == len(src_reports)
    for r, mine in zip(src_reports, reports, strict=True):
        assert mine["title"] == r["title"]
        assert mine["summary"] == r["summary"] and mine["rating"] == r["rank"]
        held = json.loads(mine["full_text"])["findings"]
        assert [f["summary"] for f in held] == [f["summary"] for f in r["findings"]]

    manifest = json.loads((imported / "manifest.json").read_text())
    source_record = manifest["stats"]["import"]
    assert source_record["system"] == "graphrag"
    assert source_record["layout"] == "graphrag 2.x+ (plain names)"
    assert set(source_record["files"]) == {f"{t}.parquet" for t in TABLES}
    assert manifest["stats"]["stages"]["import"]["entities_named_only_by_relationships"] > 0
    assert index.has("entity_vectors") and index.has("relation_vectors")
    assert not index.has("unit_vectors")  # lazy, as the config asked


def test_import_again_is_a_no_op_and_a_changed_file_is_imported(source, tmp_path) -> None:
    """The same folder again writes nothing; one changed report title is re-imported."""
    folder = tmp_path / "output"
    shutil.copytree(source, folder)
    out = tmp_path / "index"
    first = import_index(folder, out, no_vectors())
    again = import_index(folder, out, no_vectors())
    assert again.get("unchanged") and again["generation"] == first["generation"]
    table = pq.read_table(folder / "community_reports.parquet")
    titles = table["title"].to_pylist()
    titles[0] = "A retitled community"
    table = table.set_column(table.schema.get_field_index("title"), "title", pa.array(titles))
    pq.write_table(table, folder / "community_reports.parquet")
    changed = import_index(folder, out, no_vectors())
    assert changed["generation"] == first["generation"] + 1
    assert "A retitled community" in open_index(out).table("reports")["title"].to_pylist()


def _as_1x(source: Path, folder: Path) -> None:
    """GraphRAG's output rewritten in the 1.x layout: create_final_* names, a text unit's
    `document_ids` list, no community `parent`/`children`, `rank_explanation`."""
    folder.mkdir()
    for name in TABLES:
        table = pq.read_table(source / f"{name}.parquet")
        if name == "text_units":
            ids = [[d] for d in table["document_id"].to_pylist()]
            table = table.drop_columns(["document_id"]).append_column(
                "document_ids", pa.array(ids, pa.list_(pa.string()))
            )
        if name == "communities":
            table = table.drop_columns(["parent", "children"])
        if name == "community_reports":
            table = table.rename_columns(
                ["rank_explanation" if c == "rating_explanation" else c for c in table.column_names]
            )
        pq.write_table(table, folder / f"create_final_{name}.parquet")


def test_the_1x_layout_gives_the_same_index(source, tmp_path) -> None:
    """The create_final_* layout imports to the same tables; communities without a `parent`
    column get the parent GraphRAG recorded, found from their members."""
    _as_1x(source, tmp_path / "v1")
    plain = import_index(source, tmp_path / "plain", no_vectors())
    old = import_index(tmp_path / "v1", tmp_path / "old", no_vectors())
    assert old["stats"]["import"]["layout"] == "graphrag 1.x"
    a, b = open_index(tmp_path / "plain"), open_index(tmp_path / "old")
    for table in ("chunks", "entities", "relations", "communities", "reports", "unit_entity"):
        assert a.table(table).equals(b.table(table)), table

    def counts(manifest: dict) -> dict:
        stage = manifest["stats"]["stages"]["import"]
        return {k: v for k, v in stage.items() if k not in ("seconds", "peak_rss_mb")}

    assert counts(plain) == counts(old)


def test_the_1x_export_imports_back_to_the_same_index(imported, tmp_path) -> None:
    """`parquet-graphrag-1x` writes GraphRAG 1.x's seven create_final_* tables (a text unit's
    `document_ids`, an entity's node row per community); importing them and exporting in the
    current layout gives the current export of the same index."""
    v1 = tmp_path / "v1"
    assert main(["export", str(imported), "--format", "parquet-graphrag-1x", "--out", str(v1)]) == 0
    assert sorted(p.name for p in v1.glob("*.parquet")) == sorted(
        f"create_final_{t}.parquet" for t in SCHEMAS_1X
    )
    for t, fields in SCHEMAS_1X.items():
        assert pq.read_schema(v1 / f"create_final_{t}.parquet").names == [f.name for f in fields]
    nodes = _rows(v1 / "create_final_nodes.parquet")
    comms = open_index(imported).table("communities").to_pylist()
    placed = {e for c in comms for e in c["entity_ids"]}
    entities = open_index(imported).table("entities", ["entity_id"])["entity_id"].to_pylist()
    assert len(nodes) == sum(len(c["entity_ids"]) for c in comms) + len(set(entities) - placed)
    manifest = import_index(v1, tmp_path / "again", no_vectors())
    assert manifest["stats"]["import"]["layout"] == "graphrag 1.x"
    first, second = (
        _export(imported, tmp_path / "first"),
        _export(tmp_path / "again", tmp_path / "b"),
    )
    for t in TABLES:
        assert first[t].equals(second[t]), t


def _break(source: Path, folder: Path, table: str, change) -> None:
    shutil.copytree(source, folder)
    path = folder / f"{table}.parquet"
    if change is None:
        path.unlink()
    else:
        pq.write_table(change(pq.read_table(path)), path)


def _set(table: pa.Table, column: str, row: int, value) -> pa.Table:
    values = table[column].to_pylist()
    values[row] = value
    i = table.schema.get_field_index(column)
    return table.set_column(i, column, pa.array(values, table.schema.field(column).type))


BAD = {
    "missing text units": ("text_units", None, "text_units.parquet: missing"),
    "missing column": (
        "entities",
        lambda t: t.drop_columns(["title"]),
        "no column 'title' or 'name'",
    ),
    "unknown text unit": (
        "relationships",
        lambda t: _set(t, "text_unit_ids", 3, ["no-such-unit"]),
        "row 3 names text unit 'no-such-unit'",
    ),
    "repeated id": (
        "entities",
        lambda t: _set(t, "id", 5, t["id"][4].as_py()),
        "rows 4 and 5 have the same id",
    ),
    "unknown community": (
        "community_reports",
        lambda t: _set(t, "community", 0, 9999),
        "reports on community 9999",
    ),
    "unknown entity": (
        "communities",
        lambda t: _set(t, "entity_ids", 2, ["no-such-entity"]),
        "row 2 names entity 'no-such-entity'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_naming_file_and_column_and_commits_nothing(
    case, source, tmp_path, capsys
) -> None:
    """Each broken source gets one message with the file and what is wrong; an index already
    in --out is left as it was."""
    table, change, message = BAD[case]
    out = tmp_path / "index"
    import_index(source, out, no_vectors())
    before = (out / "manifest.json").read_text()
    _break(source, tmp_path / "broken", table, change)
    (tmp_path / "index.yaml").write_text("graph:\n  embed: false\n")
    code = main(
        [
            "import",
            str(tmp_path / "broken"),
            "--out",
            str(out),
            "--config",
            str(tmp_path / "index.yaml"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert f"{table}.parquet" in err and message in err, err
    assert (out / "manifest.json").read_text() == before
    assert not any(p.name.startswith(".staging") for p in out.iterdir())


def _export(index: Path, out: Path) -> dict[str, pa.Table]:
    assert main(["export", str(index), "--format", "parquet-graphrag", "--out", str(out)]) == 0
    return {t: pq.read_table(out / f"{t}.parquet") for t in TABLES}


@pytest.mark.parametrize("which", ["graphrag import", "engine-built demo"])
def test_export_import_export_gives_the_same_tables(
    which, imported, demo_reports_index, source, tmp_path
) -> None:
    """Export in GraphRAG's layout (its own columns and types), import, export again: the same
    six tables, reports (JSON from GraphRAG, extractive text from the engine) included."""
    index = imported if which == "graphrag import" else demo_reports_index
    first = _export(index, tmp_path / "first")
    for t, table in first.items():
        assert table.schema.names == pq.read_schema(source / f"{t}.parquet").names, t
    import_index(tmp_path / "first", tmp_path / "again", no_vectors())
    second = _export(tmp_path / "again", tmp_path / "second")
    for t in TABLES:
        assert first[t].equals(second[t]), t
    assert first["communities"].num_rows > 0 and first["community_reports"].num_rows > 0
    linked = pc.list_value_length(first["text_units"]["entity_ids"])
    assert pc.sum(linked).as_py() > 0


@pytest.fixture(scope="module")
def openie(shared_data) -> tuple[Path, Path]:
    """HippoRAG's GPT-3.5 OpenIE of the MuSiQue train passages, and that corpus."""
    return (
        shared_data / "hipporag_openie_musique_train_gpt35.json",
        shared_data / "musique_train_corpus.jsonl",
    )


def test_hipporag_openie_keeps_corpus_ids_and_every_triple(openie, shared_data, tmp_path) -> None:
    """Passages keep the corpus's ids (every gold passage of MuSiQue train is found), every
    well-formed triple is a relation's weight, and each relation is sourced to its passage."""
    path, corpus = openie
    manifest = import_index(path, tmp_path / "index", no_vectors(), corpus=[corpus])
    counts = manifest["stats"]["stages"]["import"]
    assert manifest["stats"]["import"]["system"] == "hipporag"
    index = open_index(tmp_path / "index")
    docs = index.table("documents", ["doc_id", "external_id"]).to_pylist()
    ids = [json.loads(line)["id"] for line in corpus.open()]
    assert [d["external_id"] for d in docs] == ids
    gold = {p for line in (shared_data / "musique_train.jsonl").open()
            for p in json.loads(line)["supporting_passage_ids"]}  # fmt: skip
    assert gold <= set(ids)
    triples = [t for d in json.loads(path.read_text())["docs"] for t in d["extracted_triples"]]
    relations = index.table("relations").to_pylist()
    assert sum(r["weight"] for r in relations) + counts["malformed_triples"] == len(triples)
    assert 0 < counts["malformed_triples"] < 0.05 * len(triples)
    chunk_rows = index.table("chunks", ["chunk_id", "doc_id"]).to_pydict()
    chunk_doc = dict(zip(chunk_rows["chunk_id"], chunk_rows["doc_id"], strict=True))
    first = json.loads(path.read_text())["docs"][0]
    s, p, o = first["extracted_triples"][0]
    rel = [r for r in relations if r["description"] and f"{s} {p} {o}" in r["description"]]
    assert rel and {chunk_doc[c] for c in rel[0]["chunk_ids"]} == {docs[0]["doc_id"]}


@pytest.mark.parametrize("case", ["no corpus", "record missing", "extra record"])
def test_openie_and_corpus_that_do_not_match_exit_2(case, openie, tmp_path, capsys) -> None:
    """The corpus must be the one the OpenIE ran on: each side missing a passage is one error."""
    path, corpus = openie
    lines = corpus.read_text().splitlines(keepends=True)
    mine = tmp_path / "corpus.jsonl"
    if case == "record missing":
        mine.write_text("".join(lines[:-1]))
    elif case == "extra record":
        extra = {"id": "x:1", "title": "Not in the OpenIE", "text": "A passage of our own."}
        mine.write_text("".join(lines) + json.dumps(extra) + "\n")
    (tmp_path / "index.yaml").write_text("graph:\n  embed: false\n")
    args = [
        "import",
        str(path),
        "--out",
        str(tmp_path / "index"),
        "--config",
        str(tmp_path / "index.yaml"),
    ]
    code = main(args + ([] if case == "no corpus" else ["--corpus", str(mine)]))
    err = capsys.readouterr().err
    assert code == 2 and (path.name in err or mine.name in err), err
    expected = {
        "no corpus": "needs the corpus it was run on",
        "record missing": "1 passages (the first: docs[1889]",
        "extra record": "'x:1' has no passage",
    }[case]
    assert expected in err, err
    assert not (tmp_path / "index" / "manifest.json").exists()


def _as_lightrag(source: Path, folder: Path, quoted: bool) -> None:
    """GraphRAG's real output written as a LightRAG / nano-graphrag working dir, in the layout
    those projects document (networkx GraphML with `<SEP>`-joined fields, kv_store JSON; quoted
    upper-case names as older releases wrote them when `quoted`), reports as nano-graphrag
    stores them. The text is GraphRAG's LLM output; only the layout is ours."""
    import networkx as nx

    q = (lambda s: f'"{s}"') if quoted else (lambda s: s)
    units = _rows(source / "text_units.parquet")
    folder.mkdir()
    chunks = {
        u["id"]: {"tokens": u["n_tokens"], "content": u["text"], "chunk_order_index": i,
                  "full_doc_id": u["document_id"]}
        for i, u in enumerate(units)
    }  # fmt: skip
    docs = {d["id"]: {"content": d["text"]} for d in _rows(source / "documents.parquet")}
    (folder / "kv_store_text_chunks.json").write_text(json.dumps(chunks))
    (folder / "kv_store_full_docs.json").write_text(json.dumps(docs))
    graph = nx.Graph()
    entities = _rows(source / "entities.parquet")
    for e in entities:
        graph.add_node(
            q(e["title"]), entity_type=q(e["type"] or ""), description=e["description"] or "",
            source_id="<SEP>".join(e["text_unit_ids"]),
        )  # fmt: skip
    for r in _rows(source / "relationships.parquet"):
        a, b = q(r["source"]), q(r["target"])
        for end in (a, b):
            if end not in graph:
                graph.add_node(end, entity_type="", description="", source_id="")
        if graph.has_edge(a, b):
            edge = graph.edges[a, b]
            edge["weight"] += r["weight"]
            edge["description"] += "<SEP>" + r["description"]
        else:
            graph.add_edge(
                a, b, weight=r["weight"], description=r["description"], keywords="",
                source_id="<SEP>".join(r["text_unit_ids"]),
            )  # fmt: skip
    nx.write_graphml(graph, folder / "graph_chunk_entity_relation.graphml")
    title_of = {e["id"]: e["title"] for e in entities}
    reports = {r["community"]: r for r in _rows(source / "community_reports.parquet")}
    kv = {}
    for c in _rows(source / "communities.parquet"):
        kv[str(c["community"])] = {
            "level": c["level"], "title": f"Cluster {c['community']}",
            "nodes": [q(title_of[e]) for e in c["entity_ids"]],
            "sub_communities": [str(k) for k in c["children"]],
            "report_json": json.loads(reports[c["community"]]["full_content_json"]),
        }  # fmt: skip
    (folder / "kv_store_community_reports.json").write_text(json.dumps(kv))


@pytest.mark.parametrize("quoted", [False, True], ids=["lightrag", "quoted names"])
def test_a_lightrag_working_dir_gives_the_graphrag_graph(quoted, source, tmp_path) -> None:
    """The same LLM graph in LightRAG's layout imports to the same entities (names,
    descriptions), relations (pairs, weights), community hierarchy and reports as GraphRAG's."""
    _as_lightrag(source, tmp_path / "wd", quoted)
    light = import_index(tmp_path / "wd", tmp_path / "light", no_vectors())
    assert light["stats"]["import"]["layout"] == "nano-graphrag working dir"
    import_index(source, tmp_path / "gr", no_vectors())
    a, b = open_index(tmp_path / "gr"), open_index(tmp_path / "light")

    def graph(index):
        ents = index.table("entities", ["entity_id", "name", "description"]).to_pylist()
        name = {e["entity_id"]: e["name"] for e in ents}
        rels = index.table("relations", ["src", "dst", "weight"]).to_pylist()
        return (
            sorted((e["name"], e["description"] or "") for e in ents),
            sorted((name[r["src"]], name[r["dst"]], r["weight"]) for r in rels),
        )

    assert graph(a) == graph(b)
    for table in ("communities", "reports", "chunks"):
        assert a.rows(table) == b.rows(table), table
    assert a.table("communities", ["community_id", "parent_id"]).equals(
        b.table("communities", ["community_id", "parent_id"])
    )
    assert sorted(a.table("reports")["title"].to_pylist()) == sorted(
        b.table("reports")["title"].to_pylist()
    )


def _drop_chunk(folder: Path) -> None:
    chunks = json.loads((folder / "kv_store_text_chunks.json").read_text())
    chunks.pop(next(iter(chunks)))
    (folder / "kv_store_text_chunks.json").write_text(json.dumps(chunks))


def _unknown_node(folder: Path) -> None:
    kv = json.loads((folder / "kv_store_community_reports.json").read_text())
    next(iter(kv.values()))["nodes"].append("NOBODY")
    (folder / "kv_store_community_reports.json").write_text(json.dumps(kv))


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda f: (f / "kv_store_text_chunks.json").unlink(),
            "kv_store_text_chunks.json: missing",
        ),
        (_drop_chunk, "source_id names chunk"),
        (_unknown_node, "names node 'NOBODY'"),
        (lambda f: (f / "kv_store_full_docs.json").write_text("{"), "not readable JSON"),
    ],
    ids=["no chunks file", "unknown chunk", "unknown node", "broken json"],
)
def test_a_broken_lightrag_dir_exits_2(change, message, source, tmp_path, capsys) -> None:
    """Each broken working dir is one message naming the file; nothing is committed."""
    _as_lightrag(source, tmp_path / "wd", quoted=False)
    change(tmp_path / "wd")
    (tmp_path / "index.yaml").write_text("graph:\n  embed: false\n")
    code = main(
        ["import", str(tmp_path / "wd"), "--from", "lightrag", "--out", str(tmp_path / "index"),
         "--config", str(tmp_path / "index.yaml")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and message in err and str(tmp_path / "wd") in err, err
    assert not (tmp_path / "index" / "manifest.json").exists()


@pytest.mark.parametrize("which", ["graphrag import", "engine-built demo"])
def test_lightrag_export_imports_to_the_same_graph(
    which, imported, demo_reports_index, tmp_path
) -> None:
    """`export --format lightrag` writes a working dir networkx reads with LightRAG's attribute
    names, and importing it gives back the same chunks, entities and relations."""
    import networkx as nx

    index = imported if which == "graphrag import" else demo_reports_index
    out = tmp_path / "wd"
    assert main(["export", str(index), "--format", "lightrag", "--out", str(out)]) == 0
    graph = nx.read_graphml(out / "graph_chunk_entity_relation.graphml")
    a = open_index(index)
    assert graph.number_of_nodes() == a.rows("entities")
    node = next(iter(graph.nodes(data=True)))[1]
    assert {"entity_type", "description", "source_id"} <= set(node)
    edge = next(iter(graph.edges(data=True)))[2]
    assert {"weight", "description", "keywords", "source_id"} <= set(edge)
    import_index(out, tmp_path / "again", no_vectors())
    b = open_index(tmp_path / "again")
    assert a.table("chunks", ["chunk_id", "text"]).equals(b.table("chunks", ["chunk_id", "text"]))
    cols = ["entity_id", "name", "type", "description", "chunk_ids"]
    assert a.table("entities", cols).equals(b.table("entities", cols))
    cols = ["rel_id", "src", "dst", "description", "keywords", "weight", "chunk_ids"]
    assert a.table("relations", cols).equals(b.table("relations", cols))
