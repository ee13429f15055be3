"""LightRAG and nano-graphrag working directories as an `ImportedGraph`, read as their projects
write them: `graph_chunk_entity_relation.graphml` (nodes keyed by entity name with
`entity_type`, `description` and `source_id`; edges with `weight`, `description`, `keywords`
and `source_id`; several values joined by `<SEP>`), `kv_store_text_chunks.json` (chunk id ->
`content`, `chunk_order_index`, `full_doc_id`), `kv_store_full_docs.json` (doc id ->
`content`) and, where nano-graphrag wrote them, `kv_store_community_reports.json` (community
key -> `level`, `nodes`, `sub_communities`, `report_json`).

Names keep their letters; the double quotes older releases put around names and types are
dropped. A description joined by `<SEP>` becomes one line per part.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from graphrag_engine.errors import BadInputError
from graphrag_engine.importers.columns import (
    KEYS,
    TEXT,
    TEXTS,
    WHOLE,
    check_columns,
    number_text,
    optional,
)
from graphrag_engine.importers.imported import (
    EntityTable,
    ImportedGraph,
    RelationTable,
    documents_and_chunks,
    file_sha256,
    source_json,
)
from graphrag_engine.index.communities import community_id

GRAPHML = "graph_chunk_entity_relation.graphml"
CHUNKS = "kv_store_text_chunks.json"
DOCS = "kv_store_full_docs.json"
REPORTS = "kv_store_community_reports.json"
SEP = "<SEP>"
_NS = {"g": "http://graphml.graphdrawing.org/xmlns"}


FIX = "copy it again from LightRAG's working dir"


def is_lightrag_dir(folder: Path) -> bool:
    """Whether `folder` looks like a LightRAG / nano-graphrag working directory."""
    return folder.is_dir() and (folder / GRAPHML).is_file()


def read_lightrag(folder: Path) -> ImportedGraph:
    """The working directory `folder` as engine rows (BadInputError on anything missing)."""
    for name in (GRAPHML, CHUNKS):
        if not (folder / name).is_file():
            raise BadInputError(
                f"{folder / name}: missing; a LightRAG working directory holds {GRAPHML} and "
                f"{CHUNKS}: point import at the working_dir LightRAG wrote"
            )
    paths = [folder / n for n in (GRAPHML, CHUNKS, DOCS, REPORTS) if (folder / n).is_file()]
    chunks_kv = _kv(folder / CHUNKS)
    chunk_kinds = {
        "content": TEXT,
        "chunk_order_index": optional(WHOLE),
        "full_doc_id": optional(TEXT),
    }
    check_columns(chunks_kv, str(folder / CHUNKS), chunk_kinds, FIX, "chunk")
    docs_kv = _kv(folder / DOCS) if (folder / DOCS).is_file() else {}
    doc_kinds = {"content": optional(TEXT), "file_path": optional(TEXT)}
    check_columns(docs_kv, str(folder / DOCS), doc_kinds, FIX, "document")
    documents, chunks, chunk_of = _documents_and_chunks(chunks_kv, docs_kv, folder)
    nodes, edges = _graph(folder / GRAPHML)
    entities, by_name = EntityTable(), {}
    for name, data in nodes.items():
        eid = entities.add(
            _unquote(name),
            _unquote(data.get("entity_type", "")) or None,
            _lines(data.get("description")),
            _sources(data.get("source_id"), chunk_of, folder / GRAPHML, f"node {name!r}"),
        )
        if eid is None:
            raise BadInputError(f"{folder / GRAPHML}: node {name!r} has no word to name an entity")
        by_name[name] = eid
    relations = RelationTable()
    for src, dst, data in edges:
        where = f"edge {src!r} - {dst!r}"
        for end in (src, dst):
            if end not in by_name:
                raise BadInputError(f"{folder / GRAPHML}: {where} names no node {end!r}")
        relations.add(
            by_name[src],
            by_name[dst],
            _lines(data.get("description")),
            _lines(data.get("keywords"), ", "),
            number_text(data.get("weight"), f"{folder / GRAPHML}: {where}, weight", FIX),
            _sources(data.get("source_id"), chunk_of, folder / GRAPHML, where),
        )
    ordered = entities.ordered()
    communities, reports = (
        _communities(folder / REPORTS, by_name) if REPORTS in {p.name for p in paths} else ([], [])
    )
    return ImportedGraph(
        system="lightrag",
        layout="nano-graphrag working dir" if reports else "lightrag working dir",
        files={p.name: file_sha256(p) for p in paths},
        documents=documents,
        chunks=chunks,
        entities=ordered,
        relations=relations.ordered(),
        communities=communities,
        reports=reports,
    )


def _kv(path: Path) -> dict[str, Any]:
    """A kv_store JSON file (an object of objects)."""
    data = source_json(path, "copy it again from LightRAG's working dir")
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise BadInputError(f"{path}: not a LightRAG key-value store (an object of objects)")
    return data


def _documents_and_chunks(
    chunks_kv: dict[str, dict], docs_kv: dict[str, dict], folder: Path
) -> tuple[list[dict], list[dict], dict[str, str]]:
    """Documents (engine content ids, LightRAG's id as external_id) and their chunks in
    `chunk_order_index` order; each LightRAG chunk id's engine chunk id."""
    ordered: dict[str, list[tuple[int, str, str]]] = {}
    for key, value in chunks_kv.items():
        if "content" not in value:
            raise BadInputError(f"{folder / CHUNKS}: chunk {key!r} has no 'content'")
        doc = value.get("full_doc_id") or "(no document)"
        if docs_kv and doc not in docs_kv:
            raise BadInputError(
                f"{folder / CHUNKS}: chunk {key!r} names document {doc!r}, which {DOCS} does not "
                "hold; copy both files from the same working dir"
            )
        ordered.setdefault(doc, []).append(
            (int(value.get("chunk_order_index") or 0), key, value["content"])
        )
    members = {
        doc: [(key, text) for _, key, text in sorted(parts)] for doc, parts in ordered.items()
    }
    stored = {doc: (d.get("file_path"), d.get("content")) for doc, d in docs_kv.items()}
    return documents_and_chunks(members, stored, str(folder / (DOCS if docs_kv else CHUNKS)))


def _graph(path: Path) -> tuple[dict[str, dict], list[tuple[str, str, dict]]]:
    """Nodes (name -> attributes) and edges of a GraphML file, attributes by their key names."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise BadInputError(f"{path}: not readable GraphML ({exc}); copy it again") from None
    names = {k.get("id"): k.get("attr.name") for k in root.findall("g:key", _NS)}

    def attrs(element: ET.Element) -> dict[str, str]:
        return {
            names.get(d.get("key"), d.get("key")): d.text or ""
            for d in element.findall("g:data", _NS)
        }

    graph = root.find("g:graph", _NS)
    if graph is None:
        raise BadInputError(f"{path}: no <graph> element; is this LightRAG's graph file?")
    nodes = {n.get("id"): attrs(n) for n in graph.findall("g:node", _NS)}
    edges = [(e.get("source"), e.get("target"), attrs(e)) for e in graph.findall("g:edge", _NS)]
    return nodes, edges


def _unquote(value: str) -> str:
    """A name or type without the double quotes older releases wrote around it."""
    value = (value or "").strip()
    return value[1:-1].strip() if len(value) >= 2 and value[0] == value[-1] == '"' else value


def _lines(value: str | None, joiner: str = "\n") -> str | None:
    """A `<SEP>`-joined value as lines (or `joiner`-joined parts)."""
    parts = [p.strip() for p in (value or "").split(SEP) if p.strip()]
    return joiner.join(dict.fromkeys(parts)) or None


def _sources(value: str | None, chunk_of: dict[str, str], path: Path, where: str) -> list[str]:
    """Engine chunk ids of a `<SEP>`-joined source_id (each must be a stored chunk)."""
    out = []
    for key in (value or "").split(SEP):
        key = key.strip()
        if not key:
            continue
        if key not in chunk_of:
            raise BadInputError(
                f"{path}: {where} source_id names chunk {key!r}, which {CHUNKS} does not hold; "
                "copy both files from the same working dir"
            )
        out.append(chunk_of[key])
    return out


def _communities(path: Path, by_name: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """nano-graphrag's communities (parents from `sub_communities`) and their reports."""
    kv = _kv(path)
    kinds = {"level": optional(WHOLE), "nodes": optional(TEXTS), "sub_communities": optional(KEYS)}
    check_columns(kv, str(path), kinds, FIX, "community")
    members, parent = {}, {}
    for key, value in kv.items():
        missing = [n for n in value.get("nodes") or [] if n not in by_name]
        if missing:
            raise BadInputError(
                f"{path}: community {key!r} names node {missing[0]!r}, which the graph does not "
                "hold; copy both files from the same working dir"
            )
        members[key] = sorted({by_name[n] for n in value.get("nodes") or []})
        for child in value.get("sub_communities") or []:
            parent[str(child)] = key
    ids = {k: community_id(int(v.get("level") or 0), members[k]) for k, v in kv.items()}
    communities, reports = [], []
    for key, value in kv.items():
        communities.append(
            {"community_id": ids[key], "level": int(value.get("level") or 0),
             "parent_id": ids.get(parent.get(key, "")), "entity_ids": members[key]}
        )  # fmt: skip
        report = value.get("report_json")
        if isinstance(report, dict) and report:
            reports.append(
                {
                    "community_id": ids[key],
                    "title": str(report.get("title") or value.get("title") or key),
                    "summary": str(report.get("summary") or ""),
                    "rating": float(report["rating"])
                    if isinstance(report.get("rating"), int | float)
                    else None,
                    "full_text": json.dumps(report, ensure_ascii=False, indent=4),
                }
            )
    return communities, reports
