"""The index's `tree` section: RAPTOR's recursive tree of cluster summaries over the chunks
(graphrag_engine/index/tree.py builds it; the `raptor` method reads it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal


@dataclass
class TreeConfig:
    """RAPTOR's tree: chunk vectors reduced with UMAP, soft-clustered by Gaussian mixtures
    (count by BIC, global then local), each cluster summarised, level upon level."""

    PAPER: ClassVar[dict[str, str]] = {  # RAPTOR (Sarthi et al., ICLR 2024) and its code
        "summaries": "llm (gpt-3.5-turbo in the paper)",
        "dim": "10 (authors' code: reduction_dimension)",
        "threshold": "0.1 (authors' code: GMM membership probability)",
        "max_clusters": "50 (authors' code: BIC sweep bound)",
        "max_levels": "5 (authors' code: num_layers)",
        "cluster_tokens": "3,500 (authors' code: max_length_in_cluster)",
        "summary_tokens": "100 (authors' code: summarization_length)",
        "seed": "224 (authors' code: RANDOM_SEED)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "dim": ">= 2",
        "threshold": "(0, 1]",
        "max_clusters": ">= 2",
        "max_levels": ">= 1",
        "cluster_tokens": ">= 1",
        "summary_tokens": ">= 1",
    }

    enabled: bool = False
    """Build the tree (needs chunk vectors, so graph.enabled: true); the `raptor` method reads
    it."""
    relatedness: bool = False
    """Also build SiReRAG's relatedness tree: every entity's knowledge units joined (proposition
    aggregates), clustered and summarised the same way (the `sirerag` method reads both)."""
    summaries: Literal["llm", "extractive"] = "extractive"
    """llm: each cluster summarised by models.llm (RAPTOR); extractive: the cluster's own
    sentences nearest its centroid, up to summary_tokens (no LLM)."""
    dim: int = 10
    """UMAP's output dimensions before the Gaussian mixtures; a level of at most dim + 1 nodes
    is the top."""
    threshold: float = 0.1
    """A node joins every cluster whose mixture probability for it exceeds this (soft
    membership: one node may have several parents)."""
    max_clusters: int = 50
    """Largest mixture size the BIC sweep tries."""
    max_levels: int = 5
    """Summary levels at most above the chunks."""
    cluster_tokens: int = 3500
    """A cluster whose members hold more tokens than this is clustered again (the summariser's
    input limit)."""
    summary_tokens: int = 100
    """Tokens of one summary (the LLM's completion budget; the extractive summary's bound)."""
    seed: int = 224
    """Seed of UMAP and the mixtures (same seed, same tree)."""
