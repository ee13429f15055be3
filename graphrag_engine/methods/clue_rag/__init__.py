"""Clue-RAG: Q-Iter over a chunk / knowledge-unit / entity graph (the algorithm: method.py)."""

from graphrag_engine.methods.clue_rag.method import ClueRAGConfig, clue_rag

__all__ = ["ClueRAGConfig", "clue_rag"]
