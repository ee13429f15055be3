"""ReGraphRAG: perspective expansion, subgraph reorganization, triplet reranking (the algorithm: method.py)."""

from graphrag_engine.methods.regraphrag.method import ReGraphRAGConfig, regraphrag

__all__ = ["ReGraphRAGConfig", "regraphrag"]
