"""Comparing two indexes in tests (graphrag_engine.store.compare does the work)."""

from __future__ import annotations

from graphrag_engine.store.compare import CONTENT_TABLES as TABLES
from graphrag_engine.store.compare import index_differences, table_rows, vectors_by_id

__all__ = [
    "RAY_TABLES",
    "TABLES",
    "assert_same_index",
    "index_differences",
    "table_rows",
    "vectors_by_id",
]

RAY_TABLES = [
    "documents",
    "chunks",
    "units",
    "entities",
    "relations",
    "unit_entity",
    "graph_cue",
    "graph_entity",
]
"""The tables a Ray-built index must share with a local build."""


def assert_same_index(a, b, tables: list[str] = TABLES) -> None:
    """Same rows in every table (a document's source path aside) and the same vectors."""
    assert index_differences(a, b, tables) == []
