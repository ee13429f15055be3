"""Explicit Arrow schemas of every table an index holds (DESIGN.md, data model).

All ids are content hashes (hex), so re-indexing the same text yields the same ids.
Bump SCHEMA_VERSION whenever a schema below changes incompatibly.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1
"""Version of the on-disk index layout this release writes and the newest it can read."""

_ID = pa.string()
_IDS = pa.list_(pa.string())

DOCUMENTS = pa.schema(
    [
        pa.field("doc_id", _ID, nullable=False),
        pa.field("external_id", pa.string()),  # the id the corpus gave the record, if any
        pa.field("title", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # file:line the record came from
        pa.field("meta", pa.string()),  # JSON of the record's other fields
    ]
)

CHUNKS = pa.schema(
    [
        pa.field("chunk_id", _ID, nullable=False),
        pa.field("doc_id", _ID, nullable=False),
        pa.field("idx", pa.int32(), nullable=False),  # position of the chunk in its document
        pa.field("text", pa.string(), nullable=False),
        pa.field("n_tokens", pa.int32(), nullable=False),
        pa.field("start_char", pa.int64(), nullable=False),
        pa.field("end_char", pa.int64(), nullable=False),
    ]
)

UNITS = pa.schema(
    [
        pa.field("unit_id", _ID, nullable=False),
        pa.field("chunk_id", _ID, nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("origin", pa.string(), nullable=False),  # "llm" | "sentence"
    ]
)

ENTITIES = pa.schema(
    [
        pa.field("entity_id", _ID, nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("type", pa.string()),
        pa.field("description", pa.string()),
        pa.field("chunk_ids", _IDS, nullable=False),  # provenance
    ]
)

RELATIONS = pa.schema(
    [
        pa.field("rel_id", _ID, nullable=False),
        pa.field("src", _ID, nullable=False),
        pa.field("dst", _ID, nullable=False),
        pa.field("description", pa.string()),
        pa.field("keywords", pa.string()),
        pa.field("weight", pa.float64(), nullable=False),
        pa.field("chunk_ids", _IDS, nullable=False),
    ]
)

UNIT_ENTITY = pa.schema(
    [
        pa.field("unit_id", _ID, nullable=False),
        pa.field("entity_id", _ID, nullable=False),
    ]
)

COMMUNITIES = pa.schema(
    [
        pa.field("community_id", _ID, nullable=False),
        pa.field("level", pa.int32(), nullable=False),
        pa.field("parent_id", _ID),
        pa.field("entity_ids", _IDS, nullable=False),
    ]
)

REPORTS = pa.schema(
    [
        pa.field("community_id", _ID, nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("summary", pa.string(), nullable=False),
        pa.field("rating", pa.float64()),
        pa.field("full_text", pa.string(), nullable=False),
    ]
)

# RAPTOR's summary nodes (graphrag_engine/index/tree.py); tree_vectors holds their vectors.
TREE = pa.schema(
    [
        pa.field("node_id", _ID, nullable=False),
        pa.field("level", pa.int32(), nullable=False),  # 1 above the chunks, and up
        pa.field("text", pa.string(), nullable=False),
        # node numbers: a chunk's row for a leaf, n_chunks + row of this table for a summary
        pa.field("children", pa.list_(pa.int64()), nullable=False),
        pa.field("leaves", pa.list_(pa.int64()), nullable=False),  # chunk rows below the node
    ]
)

# KET-RAG's skeleton (graphrag_engine/index/skeleton.py): every chunk's PageRank on the KNN
# chunk graph and whether it is a core chunk.
SKELETON = pa.schema(
    [
        pa.field("chunk_row", pa.int64(), nullable=False),
        pa.field("pagerank", pa.float64(), nullable=False),
        pa.field("core", pa.bool_(), nullable=False),
    ]
)

# KET-RAG's text-keyword bipartite graph: every word and the chunk rows that hold it;
# keyword_vectors holds each word's mean unit vector in the same order.
KEYWORDS = pa.schema(
    [
        pa.field("word", pa.string(), nullable=False),
        pa.field("chunks", pa.list_(pa.int64()), nullable=False),
    ]
)

# A graph of one kind ("entity", "chunk_unit_entity", "passage_entity") as an edge table;
# kernels build CSR from it when the index is opened.
GRAPH_EDGES = pa.schema(
    [
        pa.field("src", pa.int64(), nullable=False),
        pa.field("dst", pa.int64(), nullable=False),
        pa.field("weight", pa.float32(), nullable=False),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "documents": DOCUMENTS,
    "chunks": CHUNKS,
    "units": UNITS,
    "entities": ENTITIES,
    "relations": RELATIONS,
    "unit_entity": UNIT_ENTITY,
    "communities": COMMUNITIES,
    "reports": REPORTS,
    "tree": TREE,
    "related_tree": TREE,  # SiReRAG: proposition aggregates (level 0) and their summaries
    "skeleton": SKELETON,
    "keywords": KEYWORDS,
}


def schema_for(table: str) -> pa.Schema:
    """The schema of a named table; graph edge tables are named `graph_<kind>`."""
    if table.startswith("graph_"):
        return GRAPH_EDGES
    try:
        return TABLES[table]
    except KeyError:
        raise KeyError(f"no schema for table '{table}' (known: {', '.join(TABLES)})") from None
