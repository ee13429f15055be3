"""ROGRAG: logic-form and dual-level retrieval with a verifier (the algorithm: method.py)."""

from graphrag_engine.methods.rograg.config import ROGRAGConfig
from graphrag_engine.methods.rograg.method import rograg

__all__ = ["ROGRAGConfig", "rograg"]
