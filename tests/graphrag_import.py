"""Helpers of the tests that read Microsoft GraphRAG's output imported into an index."""

from __future__ import annotations

from pathlib import Path

from graphrag_engine.config import IndexConfig
from graphrag_engine.store import open_index

BUILT_ONLY = ("raptor", "sirerag", "ketrag")
"""Methods that read parts an index build makes and an import does not (trees, skeleton)."""


def no_vectors() -> IndexConfig:
    """An import config that writes no vectors (checks that read tables only)."""
    cfg = IndexConfig()
    cfg.graph.embed = False
    return cfg


def rows_of(index: Path, table: str, column: str) -> list:
    """One column of an index table, as Python values."""
    return open_index(index).table(table, [column])[column].to_pylist()
