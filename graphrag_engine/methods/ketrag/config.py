"""KET-RAG's retrieval settings: GraphRAG's local search on the skeleton, as the authors' code
calls it, and the keyword channel's share of the context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from graphrag_engine.retrieve.local_search import GraphRAGLocalConfig


@dataclass
class KETRAGConfig(GraphRAGLocalConfig):
    """Both channels of KET-RAG: the skeleton's local search and the keyword channel, sharing
    one context budget."""

    PAPER: ClassVar[dict[str, str]] = {  # KET-RAG (Huang, Zhang and Xiao, KDD 2025), its code
        "theta": "0.5 (authors' README: create_context.py ... keyword 0.5)",
        "top_words": "1,000 (authors' code: words searched per question)",
        "max_tokens": "12,000 (authors' code: both channels together)",
        "text_unit_prop": "0.5 (authors' code: the skeleton's local search)",
        "community_prop": "0 (authors' code: no community reports)",
        "top_k_entities": "10 (authors' code: top_k_mapped_entities)",
        "top_k_relationships": "10 (authors' code)",
        "text_unit_order": "graphrag (authors' code: GraphRAG's local search context)",
        "entities": "embedding (authors' code: entity description vectors)",
    }

    RANGES: ClassVar[dict[str, str]] = {
        **GraphRAGLocalConfig.RANGES,
        "theta": "[0, 1]",
        "top_words": ">= 1",
    }

    max_tokens: int = 12000
    """Token budget of the whole context, both channels together (the authors' code)."""
    text_unit_prop: float = 0.5
    """Share of the skeleton channel's budget for its text units (core chunks)."""
    text_unit_order: Literal["graphrag", "vector"] = "graphrag"
    """Order of the skeleton entities' core chunks: by entity, then relationship support
    (GraphRAG's, which the authors' code calls), or by cosine to the question."""
    community_prop: float = 0.0
    """Share of the skeleton's budget for community reports (the authors' code gives none)."""
    theta: float = 0.5
    """The keyword channel's chunks get (1 - theta) x max_tokens; the skeleton's local search
    gets what their text leaves. 0: keyword channel only; 1: skeleton only."""
    top_words: int = 1000
    """Keywords nearest the question whose chunks the keyword channel walks."""
