"""KET-RAG: GraphRAG's local search on a skeleton of core chunks beside a keyword channel
(method.py; the index: graphrag_engine/index/skeleton.py)."""

from graphrag_engine.methods.ketrag.config import KETRAGConfig
from graphrag_engine.methods.ketrag.method import ketrag

__all__ = ["KETRAGConfig", "ketrag"]
