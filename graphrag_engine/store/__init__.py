"""Index store: Arrow schemas, Parquet tables, vectors, manifest and atomic commit."""

from graphrag_engine.store.index_store import Index, open_index
from graphrag_engine.store.index_writer import IndexWriter
from graphrag_engine.store.schemas import SCHEMA_VERSION, TABLES

__all__ = ["Index", "IndexWriter", "open_index", "SCHEMA_VERSION", "TABLES"]
