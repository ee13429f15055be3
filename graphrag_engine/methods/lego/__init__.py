"""LEGO-GraphRAG: subgraph extraction, path filtering and path refinement (method.py)."""

from graphrag_engine.methods.lego.method import LegoConfig, lego

__all__ = ["LegoConfig", "lego"]
