"""DRIFT search: a primer over community reports, follow-up rounds of local search, a reduce
(method.py; its prompts: prompts.py; its settings: config.py)."""

from graphrag_engine.methods.drift.config import DRIFTConfig
from graphrag_engine.methods.drift.method import drift

__all__ = ["DRIFTConfig", "drift"]
