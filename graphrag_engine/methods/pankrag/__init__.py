"""PankRAG: a dependency-aware plan run level by level (the algorithm: method.py)."""

from graphrag_engine.methods.pankrag.config import PankRAGConfig
from graphrag_engine.methods.pankrag.method import pankrag

__all__ = ["PankRAGConfig", "pankrag"]
