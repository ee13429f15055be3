"""SiReRAG: one retrieval pool of a similarity tree and a relatedness tree (method.py; the
trees: graphrag_engine/index/tree.py)."""

from graphrag_engine.methods.sirerag.method import SiReRAGConfig, sirerag

__all__ = ["SiReRAGConfig", "sirerag"]
