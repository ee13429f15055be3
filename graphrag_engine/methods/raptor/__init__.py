"""RAPTOR: retrieval from every level of a recursive tree of cluster summaries (method.py;
the tree itself: graphrag_engine/index/tree.py)."""

from graphrag_engine.methods.raptor.method import RaptorConfig, raptor

__all__ = ["RaptorConfig", "raptor"]
