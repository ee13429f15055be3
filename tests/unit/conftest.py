"""The unit tier: no model, no server, no Ray cluster, no ../shared; fixtures are made by the
tests or shipped under tests/data. Enforced, not just promised: while a unit test runs, importing
a model, server or cluster library fails (in this process and in any CLI child it starts, whose
PYTHONPATH carries the same guard), and the shared-data fixture fails. A test that needs any of
them belongs in tests/integration."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.unit.guard import blocker

GUARD = Path(blocker.__file__).resolve().parent
HERE = Path(__file__).resolve().parent
blocker.remove()  # importing installs it; on below while unit tests are collected and run


def pytest_configure(config: pytest.Config) -> None:
    """When only the unit tier runs (`pytest tests/unit`, CI's first step), block model
    libraries from collection on: a unit test file that imports one fails to collect."""
    paths = [Path(a.split("::")[0]).resolve() for a in config.args]
    if paths and all(p == HERE or HERE in p.parents for p in paths):
        blocker.install()


@pytest.fixture(autouse=True)
def _no_models_servers_or_shared(monkeypatch: pytest.MonkeyPatch):
    """Block model libraries here and in child processes for the length of one test."""
    if any(m in sys.modules for m in blocker.BLOCKED):
        yield  # a run of every tier loaded them for an integration test: the guard cannot hold
        return  # there (`pytest tests/unit`, as CI runs it first, is where it holds)
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{GUARD}{os.pathsep}{path}" if path else str(GUARD))
    was_on = blocker.BLOCKER in sys.meta_path
    blocker.install()
    try:
        yield
    finally:
        if not was_on:
            blocker.remove()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Unit tests never read ../shared/data."""
    pytest.fail("unit tier: ../shared/data is not read here; move the test to tests/integration")
