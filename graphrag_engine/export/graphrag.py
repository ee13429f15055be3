"""`export --format parquet-graphrag`: the index as Microsoft GraphRAG's output tables, with the
table and column names of its current releases (2.x and 3.x; checked against GraphRAG 3.1.2's
own output in ../shared/data/graphrag_output): documents, text_units, entities,
relationships, communities and community_reports; or (`parquet-graphrag-1x`) the seven
`create_final_*` tables of the 1.x releases (as 1.2.0 writes them). `graphrag-engine import`
reads both back (graphrag_engine/importers/msgraphrag.py), so export -> import -> export gives
the same tables.

Ids are the engine's content hashes. A report whose full text is JSON (an LLM wrote it, or it
was imported) gets its findings, rating explanation and JSON back as GraphRAG's columns, and
its `full_content` rendered as GraphRAG renders it; an extractive report keeps its text as
`full_content` with no findings. An entity's missing type or description, and a relation's
missing description, are written empty: GraphRAG never writes nulls there, and its loaders
would read one as the text "nan".
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_engine.store.index_store import Index

_IDS = pa.list_(pa.string())
_FINDINGS = pa.list_(pa.struct([("explanation", pa.string()), ("summary", pa.string())]))
SCHEMAS = {
    "documents": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("title", pa.string()),
         ("text", pa.string()), ("text_unit_ids", _IDS), ("creation_date", pa.string()),
         ("raw_data", pa.string())]
    ),
    "text_units": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("text", pa.string()),
         ("n_tokens", pa.int64()), ("document_id", pa.string()), ("entity_ids", _IDS),
         ("relationship_ids", _IDS), ("covariate_ids", _IDS)]
    ),
    "entities": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("title", pa.string()),
         ("type", pa.string()), ("description", pa.string()), ("text_unit_ids", _IDS),
         ("frequency", pa.int64()), ("degree", pa.int64())]
    ),
    "relationships": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("source", pa.string()),
         ("target", pa.string()), ("description", pa.string()), ("weight", pa.float64()),
         ("combined_degree", pa.int64()), ("text_unit_ids", _IDS)]
    ),
    "communities": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("community", pa.int64()),
         ("level", pa.int64()), ("parent", pa.int64()), ("children", pa.list_(pa.int64())),
         ("title", pa.string()), ("entity_ids", _IDS), ("relationship_ids", _IDS),
         ("text_unit_ids", _IDS), ("period", pa.string()), ("size", pa.int64())]
    ),
    "community_reports": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("community", pa.int64()),
         ("level", pa.int64()), ("parent", pa.int64()), ("children", pa.list_(pa.int64())),
         ("title", pa.string()), ("summary", pa.string()), ("full_content", pa.string()),
         ("rank", pa.float64()), ("rating_explanation", pa.string()), ("findings", _FINDINGS),
         ("full_content_json", pa.string()), ("period", pa.string()), ("size", pa.int64())]
    ),
}  # fmt: skip
"""GraphRAG's current output columns, in its order."""


SCHEMAS_1X = {
    "documents": [f for f in SCHEMAS["documents"] if f.name not in ("creation_date", "raw_data")],
    "text_units": [
        *(f for f in SCHEMAS["text_units"] if f.name in ("id", "human_readable_id", "text", "n_tokens")),
        pa.field("document_ids", _IDS),
        SCHEMAS["text_units"].field("entity_ids"),
        SCHEMAS["text_units"].field("relationship_ids"),
    ],
    "entities": [f for f in SCHEMAS["entities"] if f.name not in ("frequency", "degree")],
    "nodes": [
        *(SCHEMAS["entities"].field(c) for c in ("id", "human_readable_id", "title")),
        pa.field("community", pa.int64()), pa.field("level", pa.int64()),
        pa.field("degree", pa.int64()), pa.field("x", pa.float64()), pa.field("y", pa.float64()),
    ],
    "relationships": list(SCHEMAS["relationships"]),
    "communities": [
        SCHEMAS["communities"].field(c)
        for c in ("id", "human_readable_id", "community", "parent", "level", "title",
                  "entity_ids", "relationship_ids", "text_unit_ids", "period", "size")
    ],
    "community_reports": [
        pa.field("rank_explanation", pa.string()) if f.name == "rating_explanation" else f
        for f in SCHEMAS["community_reports"] if f.name != "children"
    ],
}  # fmt: skip
"""GraphRAG 1.x's `create_final_*` columns (as 1.2.0 writes them), in its order: a text unit's
`document_ids` list, `create_final_nodes` (an entity's row per community it is in, with its
degree; layout x and y are 0), no `children`, `rank_explanation`."""


def write_graphrag_tables(tables: dict[str, list[dict]], index: Index, out: Path) -> None:
    """Write the six tables of GraphRAG's current output layout into `out`."""
    rows = graphrag_rows(tables, index)
    for table, schema in SCHEMAS.items():
        pq.write_table(pa.Table.from_pylist(rows[table], schema=schema), out / f"{table}.parquet")


def write_graphrag_1x_tables(tables: dict[str, list[dict]], index: Index, out: Path) -> None:
    """Write the seven `create_final_*` tables of GraphRAG 1.x into `out`."""
    rows = graphrag_rows(tables, index)
    for unit in rows["text_units"]:
        unit["document_ids"] = [unit["document_id"]]
    for report in rows["community_reports"]:
        report["rank_explanation"] = report["rating_explanation"]
    rows["nodes"] = _nodes_1x(rows)
    for table, fields in SCHEMAS_1X.items():
        data = pa.Table.from_pylist(rows[table], schema=pa.schema(fields))
        pq.write_table(data, out / f"create_final_{table}.parquet")


def _nodes_1x(rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """1.x's `create_final_nodes`: an entity's row per community it is in (community -1 and
    level 0 when it is in none), with its degree."""
    entity = {e["id"]: e for e in rows["entities"]}
    placed: set[str] = set()
    nodes = []
    for c in rows["communities"]:
        for eid in c["entity_ids"]:
            placed.add(eid)
            nodes.append({**_node(entity[eid]), "community": c["community"], "level": c["level"]})
    nodes += [
        {**_node(e), "community": -1, "level": 0} for e in rows["entities"] if e["id"] not in placed
    ]
    return nodes


def _node(entity: dict[str, Any]) -> dict[str, Any]:
    """The columns a 1.x node row takes from its entity row."""
    keep = ("id", "human_readable_id", "title", "degree")
    return {**{k: entity[k] for k in keep}, "x": 0.0, "y": 0.0}


def graphrag_rows(tables: dict[str, list[dict]], index: Index) -> dict[str, list[dict[str, Any]]]:
    """The rows of GraphRAG's current six output tables for an index's graph tables."""
    ents, rels, comms = tables["entities"], tables["relations"], tables["communities"]
    name = {e["entity_id"]: e["name"] for e in ents}
    degree: dict[str, int] = defaultdict(int)
    for r in rels:
        degree[r["src"]] += 1
        degree[r["dst"]] += 1
    docs = index.table("documents", ["doc_id", "title", "text"]).to_pylist()
    chunks = index.table("chunks", ["chunk_id", "doc_id", "text", "n_tokens"]).to_pylist()
    units_of: dict[str, list[str]] = defaultdict(list)
    for c in chunks:
        units_of[c["doc_id"]].append(c["chunk_id"])
    entities_of, relations_of = _by_unit(ents), _by_unit(rels)
    rows: dict[str, list[dict[str, Any]]] = {
        "documents": [
            {"id": d["doc_id"], "human_readable_id": i, "title": d["title"], "text": d["text"],
             "text_unit_ids": units_of[d["doc_id"]]}
            for i, d in enumerate(docs)
        ],
        "text_units": [
            {"id": c["chunk_id"], "human_readable_id": i, "text": c["text"],
             "n_tokens": c["n_tokens"], "document_id": c["doc_id"],
             "entity_ids": entities_of[c["chunk_id"]],
             "relationship_ids": relations_of[c["chunk_id"]], "covariate_ids": []}
            for i, c in enumerate(chunks)
        ],
        "entities": [
            {"id": e["entity_id"], "human_readable_id": i, "title": e["name"],
             "type": e["type"] or "", "description": e["description"] or "",
             "text_unit_ids": e["chunk_ids"],
             "frequency": len(e["chunk_ids"] or []), "degree": degree[e["entity_id"]]}
            for i, e in enumerate(ents)
        ],
        "relationships": [
            {"id": r["rel_id"], "human_readable_id": i, "source": name[r["src"]],
             "target": name[r["dst"]], "description": r["description"] or "",
             "weight": float(r["weight"]), "combined_degree": degree[r["src"]] + degree[r["dst"]],
             "text_unit_ids": r["chunk_ids"]}
            for i, r in enumerate(rels)
        ],
        **_community_tables(comms, tables["reports"], ents, rels),
    }  # fmt: skip
    return rows


def _by_unit(rows: list[dict]) -> dict[str, list[str]]:
    """The ids of the entities (or relations) each chunk is a source of."""
    out: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        for cid in r["chunk_ids"] or []:
            out[cid].append(r.get("entity_id") or r["rel_id"])
    return out


def _community_tables(
    comms: list[dict], reports: list[dict], ents: list[dict], rels: list[dict]
) -> dict[str, list[dict[str, Any]]]:
    """GraphRAG's communities and community_reports rows (communities numbered in table
    order; a report's id is its own, distinct from its community's, as in GraphRAG)."""
    number = {c["community_id"]: i for i, c in enumerate(comms)}
    children: dict[str, list[int]] = defaultdict(list)
    for c in comms:
        if c["parent_id"] is not None:
            children[c["parent_id"]].append(number[c["community_id"]])
    sources = {e["entity_id"]: e["chunk_ids"] or [] for e in ents}
    relations_at: dict[str, list[int]] = defaultdict(list)  # entity -> its relations' rows
    for i, r in enumerate(rels):
        relations_at[r["src"]].append(i)
    report_of = {r["community_id"]: r for r in reports}
    community_rows, report_rows = [], []
    for c in comms:
        cid, members = c["community_id"], set(c["entity_ids"])
        shared = {
            "community": number[cid],
            "level": c["level"],
            "parent": -1 if c["parent_id"] is None else number[c["parent_id"]],
            "children": children[cid],
            "size": len(c["entity_ids"]),
        }
        report = report_of.get(cid)
        community_rows.append(
            {
                "id": cid,
                "human_readable_id": number[cid],
                **shared,
                "title": f"Community {number[cid]}",  # GraphRAG's: its loaders group by it
                "entity_ids": c["entity_ids"],
                "relationship_ids": [
                    rels[i]["rel_id"]
                    for i in sorted(
                        i for e in members for i in relations_at[e] if rels[i]["dst"] in members
                    )
                ],
                "text_unit_ids": sorted({u for e in c["entity_ids"] for u in sources.get(e, [])}),
            }
        )
        if report is not None:
            report_rows.append(
                {"id": f"report-{cid}", "human_readable_id": number[cid], **shared,
                 **report_columns(report)}
            )  # fmt: skip
    return {"communities": community_rows, "community_reports": report_rows}


def report_columns(report: dict[str, Any]) -> dict[str, Any]:
    """GraphRAG's report columns of an engine report row: from its JSON when its full text is
    one (findings as GraphRAG's summary and explanation pairs), else its text as it is."""
    parsed = _json_object(report["full_text"])
    columns = {
        "title": report["title"],
        "summary": report["summary"],
        "rank": None if report["rating"] is None else float(report["rating"]),
    }
    if parsed is None:
        return {**columns, "full_content": report["full_text"], "rating_explanation": None,
                "findings": [], "full_content_json": None}  # fmt: skip
    findings = [_finding(f) for f in parsed.get("findings") or []]
    body = [f"# {report['title']}", report["summary"]]
    for f in findings:
        body += [f"## {f['summary']}", f["explanation"]]
    return {
        **columns,
        "full_content": "\n\n".join(body),
        "rating_explanation": str(parsed.get("rating_explanation") or ""),
        "findings": findings,
        "full_content_json": report["full_text"],
    }


def _finding(value: Any) -> dict[str, str]:
    """A finding as GraphRAG holds it: the engine's LLM reports write findings as plain
    sentences (summary and explanation alike), GraphRAG's as summary and explanation."""
    if isinstance(value, dict):
        return {
            "summary": str(value.get("summary") or ""),
            "explanation": str(value.get("explanation") or ""),
        }
    return {"summary": str(value), "explanation": str(value)}


def _json_object(text: str | None) -> dict[str, Any] | None:
    """`text` parsed when it is one JSON object, else None (model output is data: parsed, never run)."""
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
