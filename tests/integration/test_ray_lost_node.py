"""A Ray cluster of two nodes on loopback (a head and a worker started as separate node
processes, each declaring one GPU so the GPU placement path runs): the worker node is killed
while a sharded query runs, and while an index builds; each finishes on the head's worker with
the results of a local run (no batch written twice) and says so in one line."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
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
from tests.integration.test_ray_jobs import BIN, distinct_free_ports
from tests.integration.test_ray_query import assert_same_results

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def two_nodes(monkeypatch):
    """(the head's address, the worker node's raylet port): each node 1 CPU and 1 GPU."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # the session's in-process cluster: `ray stop --force` below
        ray.shutdown()  # would kill it under the test process; the next user starts it again
    gcs, head_raylet, worker_raylet, *agents = distinct_free_ports(7)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "GRAPHRAG_PROGRESS": "0"}
    env.pop("RAY_ADDRESS", None)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    node = ["--num-cpus", "1", "--num-gpus", "1", "--disable-usage-stats"]
    head = [
        str(BIN / "ray"), "start", "--head", "--port", str(gcs), *node,
        "--node-manager-port", str(head_raylet), "--include-dashboard", "false",
        "--dashboard-agent-listen-port", str(agents[0]),
        "--dashboard-agent-grpc-port", str(agents[1]), "--temp-dir", tempfile.mkdtemp(prefix="ray-", dir="/tmp"),
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
        yield f"127.0.0.1:{gcs}", worker_raylet
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


def test_a_lost_node_leaves_the_run_to_the_other(two_nodes, musique_subset, tmp_path, caplog):
    from graphrag_engine.query.ray_run import run_query_on_ray

    address, worker_raylet = two_nodes
    engine = Engine(musique_subset["index"])
    source, questions = engine.questions(musique_subset["questions"])
    local = engine.run("naive", questions, tmp_path / "local", retrieval_only=True, batch_size=1)
    cfg = engine.config("naive", retrieval_only=True, batch_size=1)
    out = tmp_path / "ray"
    parts, written, killed = out / "parts", {}, []

    def kill_the_worker_node_after_the_first_part(actors) -> None:
        def watch() -> None:
            while not any(parts.glob("*.jsonl")):
                time.sleep(0.01)
            written.update((p.name, p.stat().st_mtime_ns) for p in parts.glob("*.jsonl"))
            killed.append(kill_node(worker_raylet))

        threading.Thread(target=watch, daemon=True).start()

    with caplog.at_level(logging.WARNING, logger="graphrag_engine"):
        summary = run_query_on_ray(
            engine.index, questions, cfg, out, source, address=address, workers=2,
            gpus_per_worker=1, on_start=kill_the_worker_node_after_the_first_part,
        )  # fmt: skip
    assert killed and summary["questions"] == 30 and summary["resumed_questions"] == 0
    lost = [r.getMessage() for r in caplog.records if "query worker was lost" in r.getMessage()]
    assert len(lost) == 1 and "1 worker(s) left" in lost[0], lost
    assert_same_results(out, local.folder)
    for name, mtime in written.items():  # a batch written before the loss is never redone
        assert (parts / name).stat().st_mtime_ns == mtime
    assert sorted(p.name for p in parts.glob("*.jsonl")) == [f"{b:05d}.jsonl" for b in range(30)]


def test_a_lost_node_mid_index_leaves_the_build_to_the_other(
    two_nodes, demo_index, tmp_path, caplog
) -> None:
    from graphrag_engine.cli import main

    address, worker_raylet = two_nodes
    out = tmp_path / "ray"
    config = tmp_path / "gpus.yaml"
    config.write_text("ray_gpus_per_worker: 1\n")
    killed: list[int] = []

    def watch() -> None:  # the worker node dies once the pool's first block is back
        while not any((out / RAY_PARTS).glob("*.parquet")):
            time.sleep(0.01)
        killed.append(kill_node(worker_raylet))

    threading.Thread(target=watch, daemon=True).start()
    args = ["index", "--demo", "--out", str(out), "--executor", "ray", "--address", address]
    with caplog.at_level(logging.WARNING, logger="graphrag_engine"):
        assert main([*args, "--config", str(config)]) == 0
    assert killed
    lost = [r.getMessage() for r in caplog.records if "model worker was lost" in r.getMessage()]
    assert len(lost) == 1 and "1 worker(s) left" in lost[0], lost
    a, b = open_index(demo_index), open_index(out)
    assert b.manifest["stats"]["executor"] == "ray"
    assert index_differences(a, b, TABLES, atol=1e-6) == []
