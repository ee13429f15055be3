"""graphrag-engine: a batch engine for graph-based retrieval-augmented generation."""

__version__ = "0.1.0"
