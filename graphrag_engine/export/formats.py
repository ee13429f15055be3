"""`graphrag-engine export`: the index's entity graph (and its communities) in the formats other
tools read: GraphML and GEXF (Gephi, networkx, yEd), Neo4j's bulk-import CSV, Parquet tables in
GraphRAG's current output layout or its 1.x `create_final_*` layout
(graphrag_engine/export/graphrag.py), and a LightRAG working directory (its GraphML and kv stores).

Every export is written into a staging folder and its files renamed into place, so a failed
export leaves nothing half-written; `--out` is refused when it holds anything an export did not
write there (unless `--replace`), and never the index.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from graphrag_engine.errors import BadInputError
from graphrag_engine.export.graphrag import write_graphrag_1x_tables, write_graphrag_tables
from graphrag_engine.store.index_store import Index
from graphrag_engine.store.staging import OWNED, listed_files, staging_beside, write_listing

FORMATS = ("graphml", "gexf", "neo4j-csv", "parquet-graphrag", "parquet-graphrag-1x", "lightrag")
GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"
GEXF_NS = "http://gexf.net/1.3"
NODE_FIELDS = ("name", "type", "description", "community")
EDGE_FIELDS = ("weight", "description", "keywords")
XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
MARKER = ".graphrag-engine-export.json"  # what an export wrote, so a re-export may replace it


def graph_tables(index: Index) -> dict[str, list[dict[str, Any]]]:
    """Entities, relations, communities and reports of an index as row lists (the last two
    empty when the index has none); entity rows gain `community`, their finest community."""
    if not index.has("entities") or not index.has("relations"):
        raise BadInputError(
            f"{index.root}: the index has no entity graph; build it with graph.enabled: true"
        )
    entities = index.table("entities").to_pylist()
    relations = index.table("relations").to_pylist()
    communities = index.table("communities").to_pylist() if index.has("communities") else []
    reports = index.table("reports").to_pylist() if index.has("reports") else []
    finest: dict[str, tuple[int, str]] = {}
    for c in communities:
        for e in c["entity_ids"]:
            if e not in finest or c["level"] > finest[e][0]:
                finest[e] = (c["level"], c["community_id"])
    for e in entities:
        e["community"] = finest.get(e["entity_id"], (0, ""))[1]
    return {
        "entities": entities,
        "relations": relations,
        "communities": communities,
        "reports": reports,
    }


def export_graph(
    index: Index,
    fmt: str,
    out: str | Path,
    replace: bool = False,
    say: Callable[[str], None] = print,
) -> list[Path]:
    """Write the index's graph in `fmt` into the folder `out`; the files written. `out` may be
    new, empty or an earlier export (replaced as a whole); any other folder is refused unless
    `replace`, and then `say` names what goes before anything is removed."""
    if fmt not in FORMATS:
        raise BadInputError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    out = Path(out).resolve()
    check_export_folder(index, out, replace, say)
    tables = graph_tables(index)
    with staging_beside(out) as staging:
        WRITERS[fmt](tables, index, staging)
        names = sorted(p.name for p in staging.iterdir() if p.name != OWNED)
        out.mkdir(parents=True, exist_ok=True)  # kept, not replaced: it may be the working folder
        for old in out.iterdir():  # what check_export_folder let go (an earlier export, or all)
            if old.name in names or old.name == MARKER:
                continue  # replaced below
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
        for name in names:
            os.replace(staging / name, out / name)
        write_listing(out / MARKER, names, format=fmt)
    return sorted(p for p in out.iterdir() if p.name != MARKER)


def check_export_folder(
    index: Index, out: Path, replace: bool, say: Callable[[str], None] = print
) -> None:
    """Refuse an `--out` that is or holds the index, is a file, or is a folder the engine did
    not write (unless `replace`: then say what will be removed)."""
    root = index.root.resolve()
    if out == root or root.is_relative_to(out) or out.is_relative_to(root):
        raise BadInputError(
            f"--out {out}: is, holds or lies inside the index {root}; choose a folder outside it"
        )
    if not out.exists():
        return
    if not out.is_dir():
        raise BadInputError(f"--out {out}: is a file; give a folder path")
    present = sorted(p.name for p in out.iterdir())
    if not present or _written_by_export(out, present):
        return
    if not replace:
        shown = ", ".join(present[:5]) + (
            f" and {len(present) - 5} more" if len(present) > 5 else ""
        )
        raise BadInputError(
            f"--out {out}: holds files an export did not write ({shown}); choose a new or empty "
            "folder, or pass --replace to remove them"
        )
    say(f"export: --replace removes {out} and its {len(present)} entries: " + ", ".join(present))


def _written_by_export(out: Path, present: list[str]) -> bool:
    """Whether `out` holds exactly the files an earlier export listed in its marker."""
    listed = listed_files(out / MARKER)
    return listed is not None and sorted([*listed, MARKER]) == present


def _text(value: Any) -> str:
    """A value as XML 1.0 text: characters XML cannot hold (controls other than tab and
    newlines, lone surrogates, U+FFFE/U+FFFF) become U+FFFD, so any text exports well-formed."""
    return "" if value is None else XML_INVALID.sub("\ufffd", str(value))


def _write_graphml(tables: dict, index: Index, out: Path) -> None:
    """One undirected graph: entity nodes (name, type, description, finest community) and
    relation edges (weight, description, keywords)."""
    write_graphml(
        out / "graph.graphml",
        {"node": NODE_FIELDS, "edge": EDGE_FIELDS},
        ((e["entity_id"], {f: e.get(f) for f in NODE_FIELDS}) for e in tables["entities"]),
        (
            (r["rel_id"], r["src"], r["dst"], {f: r.get(f) for f in EDGE_FIELDS})
            for r in tables["relations"]
        ),
    )


def write_graphml(
    path: Path,
    fields: dict[str, tuple[str, ...]],
    nodes: Iterable[tuple[str, dict[str, Any]]],
    edges: Iterable[tuple[str | None, str, str, dict[str, Any]]],
) -> None:
    """An undirected GraphML file: a key per node and edge field (`weight` a double, the rest
    strings, ids d0, d1, ... as networkx writes them), nodes as (id, values), edges as (id or
    None, source, target, values)."""
    ET.register_namespace("", GRAPHML_NS)
    ns = f"{{{GRAPHML_NS}}}"
    root = ET.Element(f"{ns}graphml")
    key_of = {}
    for where, names in fields.items():
        for name in names:
            key_of[where, name] = key = f"d{len(key_of)}"
            kind = "double" if name == "weight" else "string"
            ET.SubElement(
                root, f"{ns}key", {"id": key, "for": where, "attr.name": name, "attr.type": kind}
            )
    graph = ET.SubElement(root, f"{ns}graph", {"edgedefault": "undirected"})

    def data(element: ET.Element, where: str, values: dict[str, Any]) -> None:
        for name, value in values.items():
            ET.SubElement(element, f"{ns}data", {"key": key_of[where, name]}).text = _text(value)

    for node_id, values in nodes:
        data(ET.SubElement(graph, f"{ns}node", {"id": _text(node_id)}), "node", values)
    for edge_id, src, dst, values in edges:
        ends = {"source": _text(src), "target": _text(dst)}
        element = ET.SubElement(
            graph, f"{ns}edge", ends if edge_id is None else {"id": edge_id, **ends}
        )
        data(element, "edge", values)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _write_gexf(tables: dict, index: Index, out: Path) -> None:
    """The same graph as GEXF 1.3 for Gephi (node label = entity name)."""
    ET.register_namespace("", GEXF_NS)
    ns = f"{{{GEXF_NS}}}"
    root = ET.Element(f"{ns}gexf", {"version": "1.3"})
    graph = ET.SubElement(root, f"{ns}graph", {"defaultedgetype": "undirected"})
    for where, fields in (("node", NODE_FIELDS[1:]), ("edge", EDGE_FIELDS[1:])):
        attrs = ET.SubElement(graph, f"{ns}attributes", {"class": where})
        for f in fields:
            ET.SubElement(attrs, f"{ns}attribute", {"id": f, "title": f, "type": "string"})
    nodes = ET.SubElement(graph, f"{ns}nodes")
    for e in tables["entities"]:
        node = ET.SubElement(nodes, f"{ns}node", {"id": e["entity_id"], "label": _text(e["name"])})
        values = ET.SubElement(node, f"{ns}attvalues")
        for f in NODE_FIELDS[1:]:
            ET.SubElement(values, f"{ns}attvalue", {"for": f, "value": _text(e.get(f))})
    edges = ET.SubElement(graph, f"{ns}edges")
    for r in tables["relations"]:
        edge = ET.SubElement(
            edges,
            f"{ns}edge",
            {"id": r["rel_id"], "source": r["src"], "target": r["dst"], "weight": str(r["weight"])},
        )
        values = ET.SubElement(edge, f"{ns}attvalues")
        for f in EDGE_FIELDS[1:]:
            ET.SubElement(values, f"{ns}attvalue", {"for": f, "value": _text(r.get(f))})
    ET.ElementTree(root).write(out / "graph.gexf", encoding="utf-8", xml_declaration=True)


def _write_neo4j_csv(tables: dict, index: Index, out: Path) -> None:
    """Files for `neo4j-admin database import full --nodes=entities.csv
    --relationships=relations.csv` (plus communities and their IN_COMMUNITY links)."""

    def write(name: str, header: list[str], rows: list[list[Any]]) -> None:
        with (out / name).open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)

    write(
        "entities.csv",
        ["entityId:ID(Entity)", "name", "type", "description", ":LABEL"],
        [
            [e["entity_id"], e["name"], _text(e["type"]), _text(e["description"]), "Entity"]
            for e in tables["entities"]
        ],
    )
    write(
        "relations.csv",
        [":START_ID(Entity)", ":END_ID(Entity)", "weight:float", "description", "keywords", ":TYPE"],
        [
            [r["src"], r["dst"], r["weight"], _text(r["description"]), _text(r["keywords"]),
             "RELATED"]
            for r in tables["relations"]
        ],
    )  # fmt: skip
    if tables["communities"]:
        titles = {r["community_id"]: r["title"] for r in tables["reports"]}
        write(
            "communities.csv",
            ["communityId:ID(Community)", "level:int", "title", ":LABEL"],
            [
                [c["community_id"], c["level"], titles.get(c["community_id"], ""), "Community"]
                for c in tables["communities"]
            ],
        )
        write(
            "in_community.csv",
            [":START_ID(Entity)", ":END_ID(Community)", ":TYPE"],
            [
                [e, c["community_id"], "IN_COMMUNITY"]
                for c in tables["communities"]
                for e in c["entity_ids"]
            ],
        )


def _write_lightrag(tables: dict, index: Index, out: Path) -> None:
    """A LightRAG working directory: `graph_chunk_entity_relation.graphml` with LightRAG's node
    (entity_type, description, source_id) and edge (weight, description, keywords, source_id)
    attributes, sources joined by `<SEP>`, and the kv stores of its chunks and documents; what
    `graphrag-engine import` (graphrag_engine/importers/lightrag.py) reads back."""
    name = {e["entity_id"]: e["name"] for e in tables["entities"]}
    write_graphml(
        out / "graph_chunk_entity_relation.graphml",
        {"node": ("entity_type", "description", "source_id"),
         "edge": ("weight", "description", "keywords", "source_id")},
        (
            (e["name"], {"entity_type": e["type"] or "", "description": e["description"] or "",
                         "source_id": "<SEP>".join(e["chunk_ids"] or [])})
            for e in tables["entities"]
        ),
        (
            (None, name[r["src"]], name[r["dst"]],
             {"weight": float(r["weight"]), "description": r["description"] or "",
              "keywords": r["keywords"] or "", "source_id": "<SEP>".join(r["chunk_ids"] or [])})
            for r in tables["relations"]
        ),
    )  # fmt: skip
    chunks = index.table("chunks", ["chunk_id", "doc_id", "idx", "text", "n_tokens"]).to_pylist()
    kv_chunks = {
        c["chunk_id"]: {"tokens": c["n_tokens"], "content": c["text"],
                        "chunk_order_index": c["idx"], "full_doc_id": c["doc_id"]}
        for c in chunks
    }  # fmt: skip
    docs = index.table("documents", ["doc_id", "title", "text"]).to_pylist()
    kv_docs = {d["doc_id"]: {"content": d["text"], "file_path": d["title"]} for d in docs}
    for file, kv in (
        ("kv_store_text_chunks.json", kv_chunks),
        ("kv_store_full_docs.json", kv_docs),
    ):
        (out / file).write_text(json.dumps(kv, ensure_ascii=False, indent=1), encoding="utf-8")


WRITERS = {
    "graphml": _write_graphml,
    "gexf": _write_gexf,
    "neo4j-csv": _write_neo4j_csv,
    "parquet-graphrag": write_graphrag_tables,
    "parquet-graphrag-1x": write_graphrag_1x_tables,
    "lightrag": _write_lightrag,
}
