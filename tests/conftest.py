"""Shared fixtures: the real data folder, a CLI runner, offline model settings."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRAPHRAG_PROGRESS", "0")
# measured LLM rates go to a file of this session, never to the user's cache folder
os.environ.setdefault(
    "GRAPHRAG_RATES_FILE",
    os.path.join(tempfile.mkdtemp(prefix="graphrag-test-rates-"), "llm_rates.json"),
)

# the dequantized copy of the packaged SmolLM2 is made once per test session, not in the
# user's cache folder: the first load converts the GGUF, every later process reads the copy
os.environ.setdefault("GRAPHRAG_MODEL_CACHE", tempfile.mkdtemp(prefix="graphrag-test-models-"))

from tests import budget
from tests.paths import REPO, SHARED_DATA

_SECONDS: list[tuple[str, float]] = []
"""(node id, seconds) of every setup, call and teardown this run, for the budget report."""
_STARTED = time.monotonic()
"""When this run began (conftest files load before collection), for the budget report."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep each phase's seconds for the budget report."""
    _SECONDS.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 - pytest's reporter
    """Each tier's seconds against its budget and its slowest files (tests/budget.py)."""
    wall = time.monotonic() - _STARTED
    lines = budget.report_lines(budget.seconds_by_file(_SECONDS), wall)
    if lines:
        terminalreporter.section("test budget")
        for line in lines:
            terminalreporter.write_line(line, red=line.startswith("OVER BUDGET"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data with the real evaluation sets (CI always has it)."""
    if not SHARED_DATA.is_dir():
        pytest.fail(
            f"real evaluation data not found at {SHARED_DATA}; check out ../shared beside the repo"
        )
    return SHARED_DATA


def _run_cli(
    *args: str, timeout: float = 900, progress: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the console script as a real process, the way a user does (progress bars off
    unless asked for)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": str(int(progress))}
    return subprocess.run(
        [sys.executable, "-m", "graphrag_engine.cli", *args],
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


@pytest.fixture(scope="session")
def smollm():
    """The packaged SmolLM2-135M GGUF in transformers, loaded once per test session (~30 s)."""
    from graphrag_engine.models.transformers_llm import TransformersLLM

    return TransformersLLM(batch_size=4)


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2 sentence-transformers embedder, loaded once."""
    from graphrag_engine.models.embed import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """A real llama.cpp OpenAI-compatible server on 127.0.0.1 serving the packaged SmolLM2, four
    requests decoded together (continuous batching), started once per test session."""
    from graphrag_engine.models.llama_server import LlamaServer

    server = LlamaServer(log=tmp_path_factory.mktemp("llama") / "server.log", parallel=4)
    try:
        yield server.wait()
    finally:
        server.stop()


@pytest.fixture
def ray_cluster():
    """The test session's one local Ray cluster (2 CPUs), started on first use and shut down
    when the session ends; in-process runs join it (`ray_session` shuts down only what it
    started). A test that needs Ray closed shuts it; the next user starts it again."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return ray


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Shut down the session's Ray cluster, if one was started."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory) -> Path:
    """The built-in demo corpus indexed once per session (alpha = 0, spaCy NER, MiniLM)."""
    from graphrag_engine.cli import main

    out = tmp_path_factory.mktemp("demo-index") / "index"
    assert main(["index", "--demo", "--out", str(out)]) == 0
    return out


@pytest.fixture
def demo_index_copy(demo_index: Path, tmp_path: Path) -> Path:
    """A copy of the session's demo index (built with the defaults, as `index --demo` builds
    it) that a test may write into, or hold as the local build another one must equal: a
    copy takes milliseconds, a build seconds."""
    import shutil

    out = tmp_path / "demo-copy"
    shutil.copytree(demo_index, out)
    return out


@pytest.fixture(scope="session")
def demo_reports_index(tmp_path_factory) -> Path:
    """The demo corpus with hierarchical communities (clusters of at most 6) and their
    extractive reports, RAPTOR's and SiReRAG's trees and KET-RAG's skeleton, built once per session without an
    LLM (global search, PankRAG's report search, the tree methods, export: every registered
    method runs on it). Reports written by SmolLM2 are built and read in
    tests/integration/test_index_communities.py."""
    from graphrag_engine.cli import main

    tmp = tmp_path_factory.mktemp("demo-reports")
    cfg = tmp / "index.yaml"
    cfg.write_text(
        "communities:\n  enabled: true\n  max_cluster_size: 6\n"
        "tree:\n  enabled: true\n  relatedness: true\nskeleton:\n  enabled: true\n"
    )
    assert main(["index", "--demo", "--out", str(tmp / "index"), "--config", str(cfg)]) == 0
    return tmp / "index"


@pytest.fixture(scope="session")
def graphrag_output(shared_data) -> Path:
    """Microsoft GraphRAG's own output folder (GraphRAG 3.1.2 over *A Christmas Carol*)."""
    return shared_data / "graphrag_output"


@pytest.fixture(scope="session")
def graphrag_import(graphrag_output, tmp_path_factory) -> Path:
    """Microsoft GraphRAG's own output (../shared/data/graphrag_output) imported once per
    session through the CLI, with vectors (unit vectors lazy)."""
    from graphrag_engine.cli import main

    root = tmp_path_factory.mktemp("import")
    out, cfg = root / "index", root / "index.yaml"
    cfg.write_text("graph:\n  unit_vectors: lazy\n")
    assert main(["import", str(graphrag_output), "--out", str(out), "--config", str(cfg)]) == 0
    return out


@pytest.fixture(scope="session")
def musique_subset(shared_data, tmp_path_factory) -> dict:
    """Real data: the first 30 MuSiQue dev questions and the union of their 20-paragraph
    contexts (about 570 passages), indexed once per session with alpha = 0."""
    import json

    from graphrag_engine.cli import main

    root = tmp_path_factory.mktemp("musique-subset")
    questions = [json.loads(x) for x in (shared_data / "musique_dev.jsonl").open()][:30]
    wanted = {p for q in questions for p in q["context_passage_ids"]}
    corpus = [
        rec
        for rec in map(json.loads, (shared_data / "musique_corpus.jsonl").open())
        if rec["id"] in wanted
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    assert main(["index", str(root / "corpus.jsonl"), "--out", str(root / "index")]) == 0
    return {
        "root": root,
        "index": root / "index",
        "questions": root / "questions.jsonl",
        "corpus": corpus,
        "gold": [json.loads(x) for x in (root / "questions.jsonl").open()],
    }
