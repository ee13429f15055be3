"""The tables of a Microsoft GraphRAG output folder the importer reads: their names in both
layouts, which are required, and what the columns it uses must hold."""

from __future__ import annotations

from graphrag_engine.importers.columns import KEY, NUMBER, TEXT, TEXTS, WEIGHT, WHOLE, optional

TABLES = (
    "documents",
    "text_units",
    "entities",
    "relationships",
    "communities",
    "community_reports",
)
REQUIRED = ("text_units", "entities", "relationships")
KINDS = {
    "documents": {"id": TEXT, "title": optional(TEXT), "text": optional(TEXT)},
    "text_units": {
        "id": TEXT,
        "text": TEXT,
        "document_id": optional(TEXT),
        "document_ids": optional(TEXTS),
    },
    "entities": {
        "id": TEXT,
        "title": optional(TEXT),
        "name": optional(TEXT),
        "type": optional(TEXT),
        "description": optional(TEXT),
        "text_unit_ids": optional(TEXTS),
    },
    "relationships": {
        "id": KEY,
        "source": optional(TEXT),
        "target": optional(TEXT),
        "description": optional(TEXT),
        "weight": optional(WEIGHT),
        "text_unit_ids": optional(TEXTS),
    },
    "communities": {
        "community": KEY,
        "level": WHOLE,
        "parent": optional(WHOLE),
        "entity_ids": optional(TEXTS),
    },
    "community_reports": {
        "community": KEY,
        "title": optional(TEXT),
        "summary": optional(TEXT),
        "rank": optional(NUMBER),
        "full_content": optional(TEXT),
        "full_content_json": optional(TEXT),
    },
}
"""What each table's columns must hold (the columns the reader uses)."""
FIX = "copy the table again from GraphRAG's output"
LAYOUTS = {"plain": "{}.parquet", "1.x": "create_final_{}.parquet"}
"""File names per layout: the later releases' plain names, the 1.x releases' create_final_*."""
