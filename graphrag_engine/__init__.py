"""graphrag-engine: a batch engine for graph-based retrieval-augmented generation.

`from graphrag_engine import Engine` is the Python API (graphrag_engine/api.py); it is imported on first use so
that `import engine` (the CLI's `--help`, `info`) does not load torch."""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Engine", "Run", "__version__"]


def __getattr__(name: str) -> Any:
    """Engine and Run, imported when first asked for."""
    if name in ("Engine", "Run"):
        from graphrag_engine import api  # the methods and models behind it load torch

        return getattr(api, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
