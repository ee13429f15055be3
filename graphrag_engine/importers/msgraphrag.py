"""Microsoft GraphRAG output folders as an `ImportedGraph`: the plain table names of the 2.x and
3.x releases (`entities.parquet`, `text_units.parquet`, ...) and the `create_final_*.parquet`
names of the 1.x releases, with their column differences (a text unit's `document_id` or
`document_ids`, an entity's `title` or `name`, a report's `rating_explanation` or
`rank_explanation`, communities with or without `parent`).

Text units become chunks, entities and relationships keep their LLM descriptions, weights and
source text units, communities their levels and parents, reports their title, summary, rating,
explanation and findings (the report's `full_text` is its JSON, as the engine's own LLM reports
hold it). Every id the source's rows name must be there; an error names the file, the row and
the column.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_engine.errors import BadInputError
from graphrag_engine.importers.columns import check_columns
from graphrag_engine.importers.imported import (
    EntityTable,
    ImportedGraph,
    RelationTable,
    documents_and_chunks,
    file_sha256,
    report_json,
)
from graphrag_engine.importers.msgraphrag_tables import FIX, KINDS, LAYOUTS, REQUIRED, TABLES
from graphrag_engine.index.communities import community_id


def is_graphrag_output(folder: Path) -> bool:
    """Whether `folder` looks like a GraphRAG output folder (either layout)."""
    return any((folder / pattern.format("entities")).is_file() for pattern in LAYOUTS.values())


def read_graphrag(folder: Path) -> ImportedGraph:
    """The GraphRAG output in `folder` as engine rows (BadInputError on anything missing)."""
    layout, paths = _files(folder)
    rows = {name: _read(path) for name, path in paths.items()}
    where = {name: str(path) for name, path in paths.items()}
    for name, table in rows.items():
        check_columns(table, where[name], KINDS[name], FIX)
    if rows["relationships"] and "id" in rows["relationships"][0]:
        _unique(rows["relationships"], "id", where["relationships"])
    documents, chunks, unit_to_chunk = _documents_and_chunks(rows, where)
    entities, by_title, by_id = _entities(rows["entities"], where["entities"], unit_to_chunk)
    relations, named_only = _relations(
        rows["relationships"], where["relationships"], entities, by_title, unit_to_chunk
    )
    communities, reports = _communities_and_reports(rows, where, by_id)
    return ImportedGraph(
        system="graphrag",
        layout=layout,
        files={path.name: file_sha256(path) for path in paths.values()},
        documents=documents,
        chunks=chunks,
        entities=entities.ordered(),
        relations=relations.ordered(),
        communities=communities,
        reports=reports,
        notes={"entities_named_only_by_relationships": named_only},
    )


def _files(folder: Path) -> tuple[str, dict[str, Path]]:
    """The layout of `folder` and the path of every table it holds."""
    for layout, pattern in LAYOUTS.items():
        paths = {
            t: folder / pattern.format(t) for t in TABLES if (folder / pattern.format(t)).is_file()
        }
        if "entities" not in paths:
            continue
        for name in REQUIRED:
            if name not in paths:
                raise BadInputError(
                    f"{folder / pattern.format(name)}: missing; a GraphRAG output folder holds "
                    f"{', '.join(pattern.format(t) for t in REQUIRED)}: point import at the "
                    "folder GraphRAG wrote (its output/ folder)"
                )
        if ("community_reports" in paths) != ("communities" in paths):
            have, lacks = (
                ("communities", "community_reports")
                if "communities" in paths
                else ("community_reports", "communities")
            )
            raise BadInputError(
                f"{folder / pattern.format(lacks)}: missing, though {pattern.format(have)} is "
                "there; copy both from GraphRAG's output, or neither"
            )
        return ("graphrag 2.x+ (plain names)" if layout == "plain" else "graphrag 1.x"), paths
    raise BadInputError(
        f"{folder}: no entities.parquet or create_final_entities.parquet; point import at the "
        "folder GraphRAG wrote (its output/ folder)"
    )


def _read(path: Path) -> list[dict[str, Any]]:
    """A table's rows, or one clear error for a file that is not Parquet."""
    try:
        return pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise BadInputError(
            f"{path}: not a readable Parquet file ({exc}); copy it again from GraphRAG's output"
        ) from None


def _column(rows: list[dict], where: str, *names: str, required: bool = True) -> str | None:
    """The first of `names` that the table has (an error naming them when required)."""
    if not rows:
        return names[0]
    for name in names:
        if name in rows[0]:
            return name
    if required:
        raise BadInputError(
            f"{where}: no column {' or '.join(repr(n) for n in names)} (columns: "
            f"{', '.join(rows[0])}); is this a GraphRAG output table?"
        )
    return None


def _unique(rows: list[dict], col: str, where: str) -> None:
    """Every row's `col` differs from every other's."""
    seen: dict[Any, int] = {}
    for i, row in enumerate(rows):
        if row[col] in seen:
            raise BadInputError(
                f"{where}: rows {seen[row[col]]} and {i} have the same {col} {row[col]!r}; "
                "ids must not repeat: copy the table again from GraphRAG's output"
            )
        seen[row[col]] = i


def _documents_and_chunks(
    rows: dict[str, list[dict]], where: dict[str, str]
) -> tuple[list[dict], list[dict], dict[str, str]]:
    """Documents (engine content ids, GraphRAG's id kept as external_id) and chunks in
    text-unit order; and each text unit's chunk id."""
    units, w = rows["text_units"], where["text_units"]
    _column(units, w, "id")
    _column(units, w, "text")
    _unique(units, "id", w)
    doc_col = _column(units, w, "document_id", "document_ids", required=False)

    def doc_of(unit: dict) -> str:
        value = unit.get(doc_col) if doc_col else None
        if isinstance(value, list):  # 1.x: a unit may name several documents; the first owns it
            value = value[0] if value else None
        return value or "(no document)"

    source_docs = {d["id"]: d for d in rows.get("documents", [])}
    if "documents" in rows:
        _column(rows["documents"], where["documents"], "id")
        _unique(rows["documents"], "id", where["documents"])
    members: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for i, unit in enumerate(units):
        doc = doc_of(unit)
        if source_docs and doc not in source_docs:
            raise BadInputError(
                f"{w}: row {i} names document {doc!r}, which {where['documents']} does not "
                "hold; copy both tables from the same GraphRAG run"
            )
        members[doc].append((unit["id"], unit["text"]))
    stored = {d: (row.get("title"), row.get("text")) for d, row in source_docs.items()}
    return documents_and_chunks(members, stored, where.get("documents", w))


def _chunks_of(
    ids: list[str] | None, unit_to_chunk: dict[str, str], where: str, row: int
) -> list[str]:
    """Chunk ids of a row's text unit ids (each must be a text unit)."""
    out = []
    for uid in ids or []:
        if uid not in unit_to_chunk:
            raise BadInputError(
                f"{where}: row {row} names text unit {uid!r}, which text_units does not hold; "
                "copy every table from the same GraphRAG run"
            )
        out.append(unit_to_chunk[uid])
    return out


def _entities(
    rows: list[dict], where: str, unit_to_chunk: dict[str, str]
) -> tuple[EntityTable, dict[str, str], dict[str, str]]:
    """Entities, and the engine id of each GraphRAG title and of each GraphRAG entity id."""
    name_col = _column(rows, where, "title", "name")
    _column(rows, where, "id")
    _unique(rows, "id", where)
    table, by_title, by_id = EntityTable(), {}, {}
    for i, row in enumerate(rows):
        chunks = _chunks_of(row.get("text_unit_ids"), unit_to_chunk, where, i)
        eid = table.add(row[name_col] or "", row.get("type"), row.get("description"), chunks)
        if eid is None:
            raise BadInputError(f"{where}: row {i} has no {name_col}; every entity needs a name")
        by_title[row[name_col]] = by_id[row["id"]] = eid
    return table, by_title, by_id


def _relations(
    rows: list[dict],
    where: str,
    entities: EntityTable,
    by_title: dict[str, str],
    unit_to_chunk: dict[str, str],
) -> tuple[RelationTable, int]:
    """Relations between imported entities, and how many of their ends the entities table
    lacks. GraphRAG writes such relationships itself (its own test output holds 84 of 978):
    an end that names no entity becomes an entity with that name and no description, sourced
    to the relationship's text units, as GraphRAG's graph has it as a node."""
    _column(rows, where, "source")
    _column(rows, where, "target")
    table, named_only = RelationTable(), set()
    for i, row in enumerate(rows):
        chunks = _chunks_of(row.get("text_unit_ids"), unit_to_chunk, where, i)
        ends = []
        for col in ("source", "target"):
            name = row[col]
            if not name:
                raise BadInputError(
                    f"{where}: row {i} has no {col}; every relationship needs both ends"
                )
            if name not in by_title:
                eid = entities.add(name, None, None, chunks)
                if eid is None:
                    raise BadInputError(
                        f"{where}: row {i} {col} {name!r} has no word to name an entity"
                    )
                by_title[name] = eid
                named_only.add(name)
            elif name in named_only:  # its sources: every relationship that names it
                entities.add(name, None, None, chunks)
            ends.append(by_title[name])
        weight = row.get("weight")
        table.add(
            *ends, row.get("description"), None, 1.0 if weight is None else float(weight), chunks
        )
    return table, len(named_only)


def _communities_and_reports(
    rows: dict[str, list[dict]], where: dict[str, str], by_id: dict[str, str]
) -> tuple[list[dict], list[dict]]:
    """Community rows (engine content ids, parents kept or, where the layout has none, the
    lower-level community holding the most members) and their reports."""
    if "communities" not in rows:
        return [], []
    comms, w = rows["communities"], where["communities"]
    for col in ("community", "level", "entity_ids"):
        _column(comms, w, col)
    _unique(comms, "community", w)
    engine_id, members = {}, {}
    for i, row in enumerate(comms):
        ids = []
        for eid in row["entity_ids"] or []:
            if eid not in by_id:
                raise BadInputError(
                    f"{w}: row {i} names entity {eid!r}, which the entities table does not "
                    "hold; copy both tables from the same GraphRAG run"
                )
            ids.append(by_id[eid])
        members[row["community"]] = sorted(set(ids))
        engine_id[row["community"]] = community_id(int(row["level"]), members[row["community"]])
    has_parent = "parent" in (comms[0] if comms else {})
    out = []
    for row in comms:
        parent = row.get("parent") if has_parent else _containing(row, comms, members)
        out.append(
            {
                "community_id": engine_id[row["community"]],
                "level": int(row["level"]),
                "parent_id": engine_id.get(parent) if parent is not None and parent >= 0 else None,
                "entity_ids": members[row["community"]],
            }
        )
    return out, _reports(
        rows.get("community_reports", []), where.get("community_reports", ""), engine_id
    )


def _containing(row: dict, comms: list[dict], members: dict[Any, list[str]]) -> Any:
    """The community one level up that holds most of `row`'s members (1.x has no parent)."""
    if int(row["level"]) == 0:
        return None
    mine = set(members[row["community"]])
    above = [c for c in comms if int(c["level"]) == int(row["level"]) - 1]
    best = max(above, key=lambda c: len(mine & set(members[c["community"]])), default=None)
    return (
        best["community"] if best is not None and mine & set(members[best["community"]]) else None
    )


def _is_json_object(text: str | None) -> bool:
    """Whether `text` is one JSON object (parsed as data, nothing more)."""
    try:
        return isinstance(json.loads(text or ""), dict)
    except ValueError:
        return False


def _reports(rows: list[dict], where: str, engine_id: dict[Any, str]) -> list[dict]:
    """Report rows; the full text is GraphRAG's JSON of the report (title, summary, rating,
    explanation, findings; made from the columns where the JSON is absent), or its
    full_content where the table has neither."""
    if not rows:
        return []
    for col in ("community", "title", "summary"):
        _column(rows, where, col)
    _unique(rows, "community", where)
    explanation_col = _column(rows, where, "rating_explanation", "rank_explanation", required=False)
    out = []
    for i, row in enumerate(rows):
        if row["community"] not in engine_id:
            raise BadInputError(
                f"{where}: row {i} reports on community {row['community']!r}, which the "
                "communities table does not hold; copy both tables from the same GraphRAG run"
            )
        rating = row.get("rank")
        findings = row.get("findings")
        full_text = row.get("full_content_json")
        if not _is_json_object(full_text):  # GraphRAG's JSON holds every part of the report
            full_text = (
                report_json(
                    row["title"],
                    row["summary"],
                    rating,
                    (row.get(explanation_col) if explanation_col else "") or "",
                    [
                        {"summary": f.get("summary"), "explanation": f.get("explanation")}
                        for f in findings
                    ],
                )
                if findings
                else row.get("full_content") or row["summary"]
            )
        out.append(
            {
                "community_id": engine_id[row["community"]],
                "title": row["title"],
                "summary": row["summary"],
                "rating": None if rating is None else float(rating),
                "full_text": full_text,
            }
        )
    return out
