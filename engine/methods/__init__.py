"""Methods: one small file each, registered by name (see base.py)."""

from engine.methods import baselines, clue_rag, hipporag, lego  # noqa: F401  (register the methods)
