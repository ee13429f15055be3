"""Methods: one small file each, registered by name (see base.py)."""

from engine.methods import baselines, hipporag  # noqa: F401  (register the methods)
