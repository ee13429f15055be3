"""The index's `skeleton` section: KET-RAG's two structures, a skeleton of core chunks picked
by PageRank on a KNN chunk graph and a keyword-chunk bipartite graph (built by
graphrag_engine/index/skeleton.py; read by the `ketrag` method)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass
class SkeletonConfig:
    """KET-RAG's index: the core chunks the graph is built from, and every word's chunks."""

    PAPER: ClassVar[dict[str, str]] = {  # KET-RAG (Huang, Zhang and Xiao, KDD 2025), its code
        "budget": "0.8 (authors' code: KG_SKELETON_BUDGET)",
        "knn_edges": "1 (authors' code: KNN_GRAPH_EDGES, lexical and semantic each)",
        "damping": "0.85 (authors' code: networkx pagerank alpha)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "budget": "[0, 1]",
        "knn_edges": ">= 1",
        "damping": "(0, 1)",
    }

    enabled: bool = False
    """Build the skeleton and the keyword index (needs chunk and unit vectors, so graph.enabled
    and graph.embed); the `ketrag` method reads them."""
    budget: float = 0.8
    """Share of the chunks in the skeleton (the best by PageRank). With extraction.enabled the
    LLM extracts triples from these chunks only: the skeleton's saving."""
    knn_edges: int = 1
    """Neighbours of each chunk in the KNN graph by shared distinct words, and as many by
    cosine."""
    damping: float = 0.85
    """PageRank's damping on the KNN graph."""
