"""HippoRAG's OpenIE JSON (`openie_*_results_*.json`: per passage its named entities and its
(subject, predicate, object) triples, written by HippoRAG's LLM extraction) plus the corpus it
was run on, as an `ImportedGraph`.

Passages are matched to corpus records by content (title and text), so the corpus's ids stay
the documents' ids and gold passages match; every corpus record needs its OpenIE passage and
every passage its record. The corpus is read and chunked as `index` reads and chunks it.
Named entities and triple ends become entities, each triple a relation between its ends
(description: the triple as a sentence; keywords: its predicate; weight: how many triples join
the pair), sourced to the passage's chunks that hold the phrase (its first chunk otherwise). An
entity is described by up to DESCRIBE_TRIPLES of its triples: what the LLM said of it. A triple
that is not three non-empty strings is the LLM's malformed output: skipped and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphrag_engine.config import IndexConfig
from graphrag_engine.errors import BadInputError
from graphrag_engine.importers.columns import NAMES, TEXT, TRIPLES, check_columns, optional
from graphrag_engine.importers.imported import (
    EntityTable,
    ImportedGraph,
    RelationTable,
    file_sha256,
    source_json,
)
from graphrag_engine.index.chunking import chunk_documents
from graphrag_engine.index.ingest import DocumentReader, content_id
from graphrag_engine.names import normalize_name

DESCRIBE_TRIPLES = 8
"""Triples that describe an entity (in passage order), as the sentences describe one in the
LLM-free build."""


PROBE_BLOCK = 1 << 20
"""Bytes read at a time while looking for OpenIE's `docs` key."""


def is_hipporag_openie(path: Path) -> bool:
    """Whether `path` looks like HippoRAG's OpenIE JSON (a file whose object has `docs`)."""
    if not path.is_file() or path.suffix != ".json":
        return False
    with open(path, "rb") as f:  # the key may come after megabytes of other keys
        tail = b""
        while block := f.read(PROBE_BLOCK):
            if b'"docs"' in tail + block:
                return True
            tail = block[-5:]
    return False


def read_hipporag(openie: Path, corpus: list[Path], config: IndexConfig) -> ImportedGraph:
    """The OpenIE file and its corpus as engine rows (BadInputError when they do not match)."""
    if not corpus:
        raise BadInputError(
            f"{openie}: HippoRAG's OpenIE needs the corpus it was run on; pass it with --corpus "
            "(the JSONL whose passages the OpenIE holds)"
        )
    passages = _passages(openie)
    reader = DocumentReader(corpus, config.ingest)
    documents, chunks = [], []
    entities, relations = EntityTable(), RelationTable()
    described: dict[str, list[str]] = {}
    seen: set[str] = set()
    malformed = 0
    for doc, doc_chunks in chunk_documents(reader, config.chunking):
        key = content_id(doc.title, doc.text)
        record = passages.get(key)
        if record is None:
            raise BadInputError(
                f"{doc.source}: record {doc.external_id or doc.title!r} has no passage in "
                f"{openie}; import with the corpus HippoRAG's OpenIE was run on"
            )
        seen.add(key)
        documents.append(doc.to_row())
        mine = [c.to_row() for c in doc_chunks]
        chunks.extend(mine)
        malformed += _add_passage(record, mine, entities, relations, described)
    missing = set(passages) - seen
    if missing:
        first = min(passages[k]["row"] for k in missing)
        raise BadInputError(
            f"{openie}: {len(missing)} passages (the first: docs[{first}], "
            f"{passages[next(iter(missing))]['title']!r}) are not in "
            f"{', '.join(map(str, corpus))}; import with the corpus the OpenIE was run on"
        )
    for eid, lines in described.items():
        entities.rows[eid]["description"] = "\n".join(lines[:DESCRIBE_TRIPLES])
    files = {openie.name: file_sha256(openie)}
    files.update({Path(p).name: file_sha256(Path(p)) for p in corpus})
    return ImportedGraph(
        system="hipporag",
        layout="hipporag openie json",
        files=files,
        documents=documents,
        chunks=chunks,
        entities=entities.ordered(),
        relations=relations.ordered(),
        notes={"malformed_triples": malformed, "passages": len(passages)},
    )


def _passages(openie: Path) -> dict[str, dict[str, Any]]:
    """The OpenIE's passages by content id (title and text), each with its row."""
    data = source_json(openie, "copy HippoRAG's file again")
    docs = data.get("docs") if isinstance(data, dict) else None
    if not isinstance(docs, list):
        raise BadInputError(f"{openie}: no 'docs' list; is this HippoRAG's OpenIE output?")
    kinds = {
        "title": TEXT,
        "text": TEXT,
        "extracted_entities": optional(NAMES),
        "extracted_triples": optional(TRIPLES),
    }
    check_columns(docs, f"{openie}: docs", kinds, "is this HippoRAG's OpenIE output?", "entry")
    out: dict[str, dict[str, Any]] = {}
    for i, doc in enumerate(docs):
        for key in ("title", "text", "extracted_entities", "extracted_triples"):
            if key not in doc:
                raise BadInputError(
                    f"{openie}: docs[{i}] has no '{key}'; is this HippoRAG's OpenIE output?"
                )
        cid = content_id(doc["title"], doc["text"])
        if cid in out:
            raise BadInputError(
                f"{openie}: docs[{out[cid]['row']}] and docs[{i}] hold the same passage; "
                "each passage must appear once"
            )
        out[cid] = {**doc, "row": i}
    return out


def _add_passage(
    record: dict[str, Any],
    chunks: list[dict[str, Any]],
    entities: EntityTable,
    relations: RelationTable,
    described: dict[str, list[str]],
) -> int:
    """Add one passage's entities and triples; the number of malformed triples skipped."""
    keyed = [(c["chunk_id"], f" {normalize_name(c['text'])} ") for c in chunks]

    def where(phrase: str) -> list[str]:
        key = f" {normalize_name(phrase)} "
        return [cid for cid, words in keyed if key in words] or [chunks[0]["chunk_id"]]

    for name in record["extracted_entities"] or []:
        if isinstance(name, str) and name.strip():
            entities.add(name, "NAMED", None, where(name))
    malformed = 0
    for triple in record["extracted_triples"] or []:
        if not (
            isinstance(triple, list)
            and len(triple) == 3
            and all(isinstance(x, str) and x.strip() for x in triple)
        ):
            malformed += 1
            continue
        subject, predicate, obj = (x.strip() for x in triple)
        sourced = where(subject)
        a = entities.add(subject, None, None, sourced)
        b = entities.add(obj, None, None, where(obj))
        if a is None or b is None or a == b:
            malformed += 1
            continue
        sentence = f"{subject} {predicate} {obj}"
        relations.add(a, b, sentence, predicate, 1.0, sourced)
        for eid in (a, b):
            described.setdefault(eid, []).append(sentence)
    return malformed
