"""The GPU install resolves without a GPU: the `gpu` extra's pins against the project's torch, and
Dockerfile.cuda's base image against that torch's CUDA, plus a hadolint pass over the file.

Resolving is done by `uv pip compile` for Linux x86_64: it reads each wheel's metadata with HTTP
range requests, so the check fetches megabytes, not the multi-GB CUDA wheels a
`pip install --dry-run` downloads (the package index serves no separate metadata files; measured
here: pip fetched the whole 336 MB vLLM wheel before resolving further). It needs the package
registry, which CI has.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache shared by this module's resolutions (metadata only)."""
    return tmp_path_factory.mktemp("uv-cache")


def resolve_gpu_extra(python: str, cache: Path) -> dict[str, str]:
    """{package: version} of `.[gpu,ray]` resolved for Linux x86_64 and the given Python."""
    out = subprocess.run(
        [
            str(BIN / "uv"), "pip", "compile", "pyproject.toml", "--extra", "gpu", "--extra",
            "ray", "--python-version", python, "--python-platform", "x86_64-manylinux_2_28",
            "--no-config", "--no-header", "--no-annotate", "--cache-dir", str(cache), "-q",
        ],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, f"the gpu extra does not resolve for Python {python}:\n{out.stderr}"
    pins = (line.split("==") for line in out.stdout.splitlines() if "==" in line)
    return {name.strip().lower(): version.strip() for name, version in pins}


def project_torch_pin() -> str:
    """The torch version pyproject.toml pins for every install."""
    found = re.search(r'"torch==([^"]+)"', (REPO / "pyproject.toml").read_text())
    assert found, "pyproject.toml pins torch"
    return found.group(1)


@pytest.mark.slow
@pytest.mark.parametrize("python", ["3.11", "3.12"])  # CI's Python, the image's Python
def test_gpu_extra_resolves_with_the_project_torch(python: str, uv_cache: Path) -> None:
    pins = resolve_gpu_extra(python, uv_cache)
    assert pins["torch"] == project_torch_pin()
    for package in ("vllm", "faiss-gpu-cu12", "flagembedding", "ray"):
        assert package in pins, f"{package} is missing from the resolved gpu extra"
    assert pins["nvidia-cuda-runtime"].startswith("13."), "torch 2.13.0 on PyPI is a CUDA 13 build"
    # the image's CUDA is the CUDA torch was built with (major.minor)
    base = re.search(
        r"^FROM nvidia/cuda:(\d+\.\d+)\.", (REPO / "Dockerfile.cuda").read_text(), re.M
    )
    assert base, "Dockerfile.cuda starts from an nvidia/cuda image"
    cuda = ".".join(pins["nvidia-cuda-runtime"].split(".")[:2])
    assert base.group(1) == cuda, f"base image CUDA {base.group(1)} != torch's CUDA {cuda}"


def test_dockerfile_lints_clean() -> None:
    out = subprocess.run(
        [str(BIN / "hadolint"), "--no-color", "Dockerfile.cuda"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
