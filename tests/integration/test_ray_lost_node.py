"""A Ray cluster of two nodes on loopback (a head and a worker started as separate node
processes, each declaring one GPU so the GPU placement path runs): the worker node is killed
while a sharded query runs, and while an index builds; each finishes on the head's worker with
the results of a local run (no batch written twice) and says so in one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psutil
import pytest

from graphrag_engine import Engine
from graphrag_engine.index.build import RAY_PARTS
from graphrag_engine.store import open_index
from tests.index_compare import RAY_TABLES as TABLES
from tests.index_compare import index_differences
from tests.integration.test_ray_jobs import BIN, cluster_env, distinct_free_ports
from tests.integration.test_ray_query import assert_same_results

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def two_nodes():
    """(the head's address, the worker node's raylet port, the env to run the CLI in): each node
    1 CPU and 1 GPU. The runs go through the CLI in processes of their own, as a user runs them,
    so this process's Ray (the session's in-process cluster) is never touched."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # the session's in-process cluster: `ray stop --force` below
        ray.shutdown()  # would kill it under the test process; the next user starts it again
    gcs, head_raylet, worker_raylet, *agents = distinct_free_ports(7)
    env = cluster_env()
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # socket paths must stay short
    node = ["--num-cpus", "1", "--num-gpus", "1", "--disable-usage-stats"]
    head = [
        str(BIN / "ray"), "start", "--head", "--port", str(gcs), *node,
        "--node-manager-port", str(head_raylet), "--include-dashboard", "false",
        "--dashboard-agent-listen-port", str(agents[0]),
        "--dashboard-agent-grpc-port", str(agents[1]), "--temp-dir", temp,
    ]  # fmt: skip
    worker = [
        str(BIN / "ray"), "start", "--address", f"127.0.0.1:{gcs}", *node,
        "--node-manager-port", str(worker_raylet),
        "--dashboard-agent-listen-port", str(agents[2]),
        "--dashboard-agent-grpc-port", str(agents[3]),
    ]  # fmt: skip
    try:
        for cmd in (head, worker):
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
            assert out.returncode == 0, out.stderr[-2000:]
        yield f"127.0.0.1:{gcs}", worker_raylet, env
    finally:
        subprocess.run([str(BIN / "ray"), "stop", "--force"], env=env, capture_output=True)


def kill_node(raylet_port: int) -> int:
    """SIGKILL the raylet serving `raylet_port` and every process under it; how many died."""
    flag = f"--node_manager_port={raylet_port}"
    raylets = [p for p in psutil.process_iter(["cmdline"]) if flag in (p.info["cmdline"] or [])]
    assert len(raylets) == 1, raylets
    doomed = [raylets[0], *raylets[0].children(recursive=True)]
    for p in doomed:
        p.send_signal(signal.SIGKILL)
    return len(doomed)


def kill_when(ready, raylet_port: int) -> list[int]:
    """Kill the node once `ready()` holds (from a thread); the list holds what died."""
    killed: list[int] = []

    def watch() -> None:
        while not ready():
            time.sleep(0.01)
        killed.append(kill_node(raylet_port))

    threading.Thread(target=watch, daemon=True).start()
    return killed


def cli(env: dict, *args: str) -> str:
    """Run the engine's CLI as a user does; its stderr (exit 0 asserted)."""
    cmd = [sys.executable, "-m", "graphrag_engine.cli", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def test_a_lost_node_leaves_the_run_to_the_other(two_nodes, musique_subset, tmp_path) -> None:
    address, worker_raylet, env = two_nodes
    index, questions = str(musique_subset["index"]), str(musique_subset["questions"])
    run = ["--method", "naive", "--retrieval-only", "--batch-size", "1"]
    local = Engine(index).run(
        "naive", questions, tmp_path / "local", retrieval_only=True, batch_size=1
    )
    out = tmp_path / "ray"
    parts = out / "parts"
    written: dict[str, int] = {}

    def first_part() -> bool:
        found = list(parts.glob("*.jsonl"))
        written.update((p.name, p.stat().st_mtime_ns) for p in found)
        return bool(found)

    killed = kill_when(first_part, worker_raylet)
    ray = ["--executor", "ray", "--address", address, "--workers", "2", "--gpus-per-worker", "1"]
    err = cli(env, "query", index, questions, *run, *ray, "--out", str(out))
    assert killed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["questions"] == 30 and summary["resumed_questions"] == 0
    lost = [ln for ln in err.splitlines() if "query worker was lost" in ln]
    assert len(lost) == 1 and "1 worker(s) left" in lost[0], err[-2000:]
    assert_same_results(out, local.folder)
    for name, mtime in written.items():  # a batch written before the loss is never redone
        assert (parts / name).stat().st_mtime_ns == mtime
    assert sorted(p.name for p in parts.glob("*.jsonl")) == [f"{b:05d}.jsonl" for b in range(30)]


def test_a_lost_node_mid_index_leaves_the_build_to_the_other(
    two_nodes, demo_index, tmp_path
) -> None:
    address, worker_raylet, env = two_nodes
    out = tmp_path / "ray"
    config = tmp_path / "gpus.yaml"
    config.write_text("ray_gpus_per_worker: 1\n")
    killed = kill_when(lambda: any((out / RAY_PARTS).glob("*.parquet")), worker_raylet)
    args = ["index", "--demo", "--out", str(out), "--executor", "ray", "--address", address]
    err = cli(env, *args, "--config", str(config))
    assert killed
    lost = [ln for ln in err.splitlines() if "model worker was lost" in ln]
    assert len(lost) == 1 and "1 worker(s) left" in lost[0], err[-2000:]
    a, b = open_index(demo_index), open_index(out)
    assert b.manifest["stats"]["executor"] == "ray"
    assert index_differences(a, b, TABLES, atol=1e-6) == []
