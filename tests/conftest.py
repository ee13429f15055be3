"""Shared fixtures: the real data folder, a CLI runner, offline model settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRAPHRAG_PROGRESS", "0")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data with the real evaluation sets (CI always has it)."""
    if not SHARED_DATA.is_dir():
        pytest.fail(
            f"real evaluation data not found at {SHARED_DATA}; check out ../shared beside the repo"
        )
    return SHARED_DATA


def _run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the console script as a real process, the way a user does."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


@pytest.fixture(scope="session")
def run_cli():
    """Callable that runs `graphrag-engine ARGS...` in a real subprocess."""
    return _run_cli
