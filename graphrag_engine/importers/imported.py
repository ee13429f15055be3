"""An imported graph written as an engine index: the readers beside this file turn another
system's output into `ImportedGraph` (engine rows: documents, chunks, entities, relations,
communities, reports), and `write_imported` adds what the engine's methods need and the source
did not ship (sentence units, unit-entity links, the three graphs, vectors from the engine's
own embedder), then commits atomically. Nothing is visible until the commit; an error before
it leaves the previous index as it was.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from graphrag_engine.config import IndexConfig
from graphrag_engine.errors import BadInputError
from graphrag_engine.index.build import peak_rss_mb
from graphrag_engine.index.chunking import chunk_id
from graphrag_engine.index.graphs import build_graphs
from graphrag_engine.index.ingest import content_id
from graphrag_engine.index.pipeline import GRAPH_PIPELINE, StagedChunks, run_pipeline
from graphrag_engine.index.resolve import entity_id, relation_id
from graphrag_engine.index.units import unit_batches
from graphrag_engine.jsonl import HUGE_NUMBER
from graphrag_engine.models.tokenizer import load_tokenizer
from graphrag_engine.names import normalize_name
from graphrag_engine.progress import progress
from graphrag_engine.store import IndexWriter
from graphrag_engine.store.manifest import read_manifest
from graphrag_engine.store.schemas import schema_for

VECTOR_STAGES = ("embed_chunks", "embed", "synonyms")
"""The build stages an import runs (with `communities` when the source has none and the config
asks for them): the source brought the graph and its provenance."""


@dataclass
class ImportedGraph:
    """Another system's index as engine rows, with where it came from."""

    system: str  # "graphrag" | "hipporag" | "lightrag"
    layout: str  # the source's version or file layout, as the reader recognised it
    files: dict[str, str]  # every file read -> its sha256
    documents: list[dict[str, Any]]
    chunks: list[dict[str, Any]]  # chunk_id, doc_id, idx, text (n_tokens filled on write)
    entities: list[dict[str, Any]]  # entity_id, name, type, description, chunk_ids
    relations: list[dict[str, Any]]  # rel_id, src, dst, description, keywords, weight, chunk_ids
    communities: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)  # what the reader had to decide

    def source(self) -> dict[str, Any]:
        """What the manifest records about the source (`stats.import`)."""
        return {
            "system": self.system,
            "layout": self.layout,
            "files": dict(sorted(self.files.items())),
        }


def file_sha256(path: Path) -> str:
    """sha256 of a file read by an importer (its identity in the manifest)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def source_json(path: Path, fix: str) -> Any:
    """A JSON file another system wrote, or one clear error naming it and what to do (`fix`)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise BadInputError(f"{path}: {HUGE_NUMBER}; {fix}") from None
        raise BadInputError(f"{path}: not readable JSON ({exc}); {fix}") from None
    except OSError as exc:
        raise BadInputError(f"{path}: not readable JSON ({exc}); {fix}") from None
    except RecursionError:
        raise BadInputError(f"{path}: JSON nested too deep to be a real export; {fix}") from None


def documents_and_chunks(
    members: dict[str, list[tuple[str, str]]],
    stored: dict[str, tuple[Any, Any]],
    source: str,
) -> tuple[list[dict], list[dict], dict[str, str]]:
    """Engine documents (content ids; the source's document id kept as `external_id`) and
    chunks from each source document's (unit key, text) pairs in order, and each unit key's
    chunk id. `stored` gives a document's title and text where the source keeps them; else the
    title is the document id and the text its units joined."""
    documents, chunks, chunk_of = [], [], {}
    for doc, units in members.items():
        title, text = stored.get(doc, (None, None))
        title = str(title or doc)
        text = text or "\n".join(unit_text for _, unit_text in units)
        doc_id = content_id(title, text)
        documents.append(
            {"doc_id": doc_id, "external_id": doc, "title": title, "text": text,
             "source": source, "meta": None}
        )  # fmt: skip
        for idx, (key, unit_text) in enumerate(units):
            chunk_of[key] = cid = chunk_id(doc_id, idx, unit_text)
            chunks.append({"chunk_id": cid, "doc_id": doc_id, "idx": idx, "text": unit_text})
    return documents, chunks, chunk_of


class EntityTable:
    """Entities keyed the engine's way (normalised name -> content-hash id); two source entities
    whose names normalise alike become one, their descriptions and sources joined."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def add(
        self, name: str, type_: str | None, description: str | None, chunk_ids: list[str]
    ) -> str | None:
        """Add (or merge into) the entity named `name`; its id, or None for a name with no word."""
        key = normalize_name(name)
        if len(key) < 1:
            return None
        eid = entity_id(key)
        row = self.rows.get(eid)
        if row is None:
            self.rows[eid] = {
                "entity_id": eid,
                "name": name.strip(),
                "type": type_ or None,
                "description": description or None,
                "chunk_ids": sorted(set(chunk_ids)),
            }
        else:
            if description and description not in (row["description"] or ""):
                row["description"] = "\n".join(filter(None, [row["description"], description]))
            row["type"] = row["type"] or type_ or None
            row["chunk_ids"] = sorted(set(row["chunk_ids"]) | set(chunk_ids))
        return eid

    def ordered(self) -> list[dict[str, Any]]:
        """Rows in id order (as a build writes them)."""
        return [self.rows[k] for k in sorted(self.rows)]


class RelationTable:
    """Undirected relations keyed the engine's way; both directions of a pair become one row,
    weights added, descriptions and keywords joined, sources united."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def add(
        self,
        src: str,
        dst: str,
        description: str | None,
        keywords: str | None,
        weight: float,
        chunk_ids: list[str],
    ) -> None:
        """Add (or merge into) the relation between two entity ids; a loop is dropped."""
        if src == dst:
            return
        a, b = sorted((src, dst))
        rid = relation_id(a, b)
        row = self.rows.get(rid)
        if row is None:
            self.rows[rid] = {
                "sentence_units": [],
                "rel_id": rid,
                "src": a,
                "dst": b,
                "description": description or None,
                "keywords": keywords or None,
                "weight": float(weight),
                "chunk_ids": sorted(set(chunk_ids)),
            }
            return
        for col, value in (("description", description), ("keywords", keywords)):
            if value and value not in (row[col] or ""):
                row[col] = "\n".join(filter(None, [row[col], value]))
        row["weight"] += float(weight)
        row["chunk_ids"] = sorted(set(row["chunk_ids"]) | set(chunk_ids))

    def ordered(self) -> list[dict[str, Any]]:
        """Rows in (src, dst) order (as a build writes them)."""
        return sorted(self.rows.values(), key=lambda r: (r["src"], r["dst"]))


def unchanged(out: Path, graph_source: dict[str, Any], config: IndexConfig) -> dict | None:
    """The manifest of `out` when it already holds this import (same files, same config)."""
    manifest = read_manifest(out) if (out / "manifest.json").exists() else None
    if not manifest:
        return None
    same_source = manifest.get("stats", {}).get("import") == graph_source
    return manifest if same_source and manifest.get("config_hash") == config.config_hash() else None


def write_imported(
    graph: ImportedGraph, out: str | Path, config: IndexConfig, read_seconds: float = 0.0
) -> dict[str, Any]:
    """Write `graph` as the index in `out` (a no-op when it already holds the same import);
    return the manifest. The import stage's seconds are the reader's (`read_seconds`) and the
    tables' up to the vectors, whose stages time themselves."""
    started = time.perf_counter()
    out = Path(out)
    source = graph.source()
    done = unchanged(out, source, config)
    if done is not None:
        return {**done, "unchanged": True}
    _check_references(graph)
    stats: dict[str, Any] = {"import": source, "stages": {}}
    with IndexWriter(out) as writer:
        tok = load_tokenizer(config.chunking.tokenizer)
        for c in graph.chunks:
            c["n_tokens"] = len(tok.encode(c["text"], add_special_tokens=False).ids)
            c.setdefault("start_char", 0)
            c.setdefault("end_char", len(c["text"]))
        writer.write_table("documents", graph.documents)
        writer.write_table("chunks", graph.chunks)
        chunks = StagedChunks.read(writer)
        unit_ids, unit_entity = _units_and_links(writer, chunks, graph.entities)
        writer.write_table("entities", graph.entities)
        writer.write_table("unit_entity", unit_entity)
        writer.write_table("relations", graph.relations)
        graphs, layouts = build_graphs(
            chunks.ids, unit_ids, graph.entities, unit_entity, graph.relations
        )
        for name, table in graphs.items():
            writer.write_table(name, table)
        stats["graphs"] = {k: {**v, "edges": graphs[k].num_rows} for k, v in layouts.items()}
        if graph.communities:
            writer.write_table("communities", graph.communities)
            writer.write_table("reports", graph.reports)
        stats["stages"]["import"] = {
            "documents": len(graph.documents),
            "chunks": len(graph.chunks),
            "units": unit_ids.num_rows,
            "entities": len(graph.entities),
            "relations": len(graph.relations),
            "communities": len(graph.communities),
            "reports": len(graph.reports),
            **graph.notes,
            "seconds": round(read_seconds + time.perf_counter() - started, 3),
            "peak_rss_mb": peak_rss_mb(),
        }
        models = {"tokenizer": config.chunking.tokenizer, "graph": f"imported:{graph.system}"}
        wanted = set(VECTOR_STAGES if config.graph.embed else ())
        if not graph.communities and config.communities.enabled:  # the engine's own, then
            wanted.add("communities")
        wanted.add("line_tokens")
        run_pipeline(
            writer,
            out,
            config,
            chunks,
            stats,
            models,
            [name for name in GRAPH_PIPELINE if name in wanted],
            unit_ids=unit_ids,
            entities=graph.entities,
            relations=graph.relations,
            unit_entity=unit_entity,
        )
        return writer.commit(
            config=config.to_dict(), config_hash=config.config_hash(), models=models, stats=stats
        )


def _units_and_links(
    writer: IndexWriter, chunks: StagedChunks, entities: list[dict[str, Any]]
) -> tuple[pa.Table, pa.Table]:
    """Sentence units of every chunk, and which of a chunk's source entities each names (its
    normalised name among the sentence's words). An entity the source tied to a chunk but no
    sentence of it names is linked to the chunk's first sentence: the source's provenance
    stays an edge of the passage graphs, with the least weight."""
    sourced: dict[str, list[tuple[str, str]]] = {}
    for e in entities:
        key = f" {normalize_name(e['name'])} "
        for cid in e["chunk_ids"]:
            sourced.setdefault(cid, []).append((e["entity_id"], key))
    ids, link_units, link_entities = [], [], []
    bar = progress("import units", total=len(chunks))
    for batch in unit_batches(chunks.pairs(), {}):
        writer.table("units").write(batch)
        ids.append(batch.select(["unit_id", "chunk_id"]))
        for cid, group in _by_chunk(batch):
            named: set[str] = set()
            for unit, text in group:
                words = f" {normalize_name(text)} "
                for eid, key in sourced.get(cid, ()):
                    if key in words:
                        link_units.append(unit)
                        link_entities.append(eid)
                        named.add(eid)
            for eid, _ in sourced.get(cid, ()):
                if eid not in named:
                    link_units.append(group[0][0])
                    link_entities.append(eid)
            bar.update(1)
    bar.close()
    schema = schema_for("units")
    unit_ids = pa.Table.from_batches(
        ids, pa.schema([schema.field("unit_id"), schema.field("chunk_id")])
    )
    links = pa.table(
        {"unit_id": pa.array(link_units, pa.string()), "entity_id": pa.array(link_entities)},
        schema=schema_for("unit_entity"),
    )
    return unit_ids, links


def _by_chunk(batch: pa.RecordBatch) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """(chunk id, [(unit id, text)]) of a units batch, chunk by chunk in order; a batch never
    splits a chunk's units (unit_batches cuts between chunks)."""
    rows = zip(*(batch.column(c).to_pylist() for c in ("unit_id", "chunk_id", "text")), strict=True)
    current, group = None, []
    for unit, chunk, text in rows:
        if chunk != current and group:
            yield current, group
            group = []
        current = chunk
        group.append((unit, text))
    if group:
        yield current, group


def _check_references(graph: ImportedGraph) -> None:
    """Every id a row names is there (the readers check the source's own ids with file and
    column; this guards what the engine's rows say of each other)."""
    if not graph.documents:
        raise BadInputError(
            f"import: the {graph.system} source ({', '.join(sorted(graph.files))}) holds no "
            "documents; give one with its text units (`index` refuses an empty corpus too)"
        )
    chunks = {c["chunk_id"] for c in graph.chunks}
    docs = {d["doc_id"] for d in graph.documents}
    entities = {e["entity_id"] for e in graph.entities}
    for c in graph.chunks:
        if c["doc_id"] not in docs:
            raise BadInputError(f"import: chunk {c['chunk_id']} names a missing document")
    for e in graph.entities:
        if not set(e["chunk_ids"]) <= chunks:
            raise BadInputError(f"import: entity '{e['name']}' names a missing text unit")
    for r in graph.relations:
        if r["src"] not in entities or r["dst"] not in entities:
            raise BadInputError(f"import: relation {r['rel_id']} names a missing entity")
    _check_hierarchy(graph.communities)


def _check_hierarchy(communities: list[dict[str, Any]]) -> None:
    """Every community's parent is there and one level or more above it, so the hierarchy has
    no cycle (a cycle would send a walk down the hierarchy round for ever)."""
    level = {c["community_id"]: c["level"] for c in communities}
    for c in communities:
        parent = c["parent_id"]
        if parent is None:
            continue
        if parent not in level:
            raise BadInputError(f"import: community {c['community_id']} names a missing parent")
        if level[parent] >= c["level"]:
            raise BadInputError(
                f"import: community {c['community_id']} (level {c['level']}) has a parent at "
                f"level {level[parent]}; a parent must sit above its children, so the "
                "source's hierarchy is damaged (a cycle, or levels out of order)"
            )


def report_json(
    title: str, summary: str, rating: float | None, explanation: str, findings: list[dict]
) -> str:
    """A report's full JSON text (what the engine's own LLM reports hold in `full_text`)."""
    return json.dumps(
        {
            "title": title,
            "summary": summary,
            "rating": rating,
            "rating_explanation": explanation,
            "findings": findings,
        },
        ensure_ascii=False,
        indent=4,
    )
