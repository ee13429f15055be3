"""LazyGraphRAG: query-time relevance tests on a budget over the concept communities
(method.py; the match: search.py; prompts: prompts.py; settings: config.py)."""

from graphrag_engine.methods.lazygraphrag.config import LazyGraphRAGConfig
from graphrag_engine.methods.lazygraphrag.method import lazygraphrag

__all__ = ["LazyGraphRAGConfig", "lazygraphrag"]
