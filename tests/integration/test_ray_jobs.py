"""`ray job submit` of the index job to a running local Ray cluster, as a user submits it: the
job joins that cluster (it used to fail there: ray.init refuses a CPU count when it joins one)
and builds the index the local executor builds."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from graphrag_engine.models.llama_server import free_port
from graphrag_engine.store import open_index
from tests.index_compare import RAY_TABLES as TABLES
from tests.index_compare import index_differences
from tests.paths import REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]

BIN = Path(sys.executable).parent
# what a job needs beside the code; the rest of the checkout stays behind
EXCLUDES = '{"excludes": [".venv", ".git", "demo", "demo-index", "bench/out", "*.egg-info"]}'


def distinct_free_ports(count: int) -> list[int]:
    """`count` different unused ports on 127.0.0.1, none of Ray's fixed defaults: the
    sockets stay bound until all are picked, so no two are the same, and every component
    gets one, since a random port may equal a default another component keeps (a CI run
    drew 52365, the dashboard agent's)."""
    ray_defaults = {6379, 8265, 10001, 52365, 8076}
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            if s.getsockname()[1] in ray_defaults:
                s.close()
                continue
            held.append(s)
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def cluster_env() -> dict[str, str]:
    """The environment of `ray` CLI commands and engine processes on a loopback cluster: the
    project's Python first on PATH (as on a node whose image holds the project), token auth
    off, no inherited RAY_ADDRESS, offline models, no progress bars."""
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "RAY_AUTH_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
        "GRAPHRAG_PROGRESS": "0",
    }
    env.pop("RAY_ADDRESS", None)
    return env


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A real Ray head on 127.0.0.1 (2 CPUs, dashboard on for job submission): env for the
    `ray` CLI and the dashboard address. The project's Python comes first on the cluster's
    PATH, as on a node whose image holds the project; token auth is off on this loopback
    cluster."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # the session's in-process cluster: `ray stop --force` below
        ray.shutdown()  # would kill it under the test process; the next user starts it again
    gcs, dashboard, agent_http, agent_grpc, runtime_env = distinct_free_ports(5)
    env = cluster_env()
    start = [
        str(BIN / "ray"), "start", "--head", "--num-cpus", "2", "--port", str(gcs),
        "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard),
        "--dashboard-agent-listen-port", str(agent_http),
        "--dashboard-agent-grpc-port", str(agent_grpc),
        "--runtime-env-agent-port", str(runtime_env),
        "--include-dashboard", "true", "--disable-usage-stats",
        "--temp-dir", str(tmp_path_factory.mktemp("ray")),
    ]  # fmt: skip
    out = subprocess.run(start, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    try:
        yield env, f"http://127.0.0.1:{dashboard}"
    finally:
        subprocess.run([str(BIN / "ray"), "stop", "--force"], env=env, capture_output=True)


def test_submitted_index_job_joins_the_cluster_and_equals_local(
    ray_cluster, tmp_path, demo_index
) -> None:
    env, address = ray_cluster
    submitted = tmp_path / "submitted"
    job = subprocess.run(
        [
            str(BIN / "ray"), "job", "submit", "--address", address, "--working-dir", str(REPO),
            "--runtime-env-json", EXCLUDES, "--",
            "python", "jobs/index_job.py", "--demo", "--out", str(submitted), "--executor", "ray",
        ],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert job.returncode == 0, (job.stdout + job.stderr)[-3000:]
    assert "succeeded" in job.stdout
    a, b = open_index(demo_index), open_index(submitted)  # the session's local demo build
    assert b.manifest["stats"]["executor"] == "ray"
    # equal but for the README's two exceptions: the source path each process saw (absolute)
    # and float32 rounding of the vectors, at most 1e-6
    assert index_differences(a, b, TABLES, atol=1e-6) == []
    for index in (a, b):
        sources = index.table("documents", ["source"]).column("source").to_pylist()
        assert all(Path(s.rsplit(":", 1)[0]).is_absolute() for s in sources)


def test_an_unreachable_cluster_is_one_clear_error(run_cli, tmp_path) -> None:
    pytest.importorskip("ray")
    out = run_cli(
        "index", "--demo", "--out", str(tmp_path / "x"), "--executor", "ray",
        "--address", f"127.0.0.1:{free_port()}",
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "cannot reach the Ray cluster" in out.stderr
    assert not (tmp_path / "x" / "manifest.json").exists()  # no index was committed


def test_actors_asking_for_absent_gpus_are_announced(capsys) -> None:
    """A config that puts a model on CUDA, on a cluster without GPUs: one warning line says
    why the actors wait, instead of Ray's silent pending."""
    ray = pytest.importorskip("ray")
    from graphrag_engine.exec.ray_executor import warn_missing_gpus

    ray.init(num_cpus=1, num_gpus=0, include_dashboard=False, log_to_driver=False)
    try:
        warn_missing_gpus(ray, 0.0)
        assert capsys.readouterr().err == ""
        warn_missing_gpus(ray, 1.0)
        err = capsys.readouterr().err
    finally:
        ray.shutdown()
    assert "asks for 1 GPU, the cluster has 0 now" in err and "ray_gpus_per_worker: 0" in err
