"""Query runs sharded over a real local Ray cluster (2 actors): the run folder equals a local
run's; an actor killed mid-run is replaced and the run finishes with the same results, no
written batch asked again; a driver killed mid-run resumes from the batches it wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from graphrag_engine import Engine
from graphrag_engine.results import read_rows
from tests.paths import REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]

METHODS = ["naive", "hipporag"]
BATCH = 4


@pytest.fixture
def cluster(ray_cluster):
    """The session's local Ray cluster (2 CPUs)."""
    return ray_cluster


DERIVED = {"seconds", "retrieved_ids", "context_ids", "context_text", "extras"}
"""Wall clock, and what follows from the chunk ranking (checked through it)."""


def comparable(folder: Path) -> list[dict]:
    """A run's result rows without the wall-clock column."""
    return [{**r, "seconds": None} for r in read_rows(folder / "results.parquet")]


def assert_same_results(a_folder: Path, b_folder: Path) -> None:
    """The same rows; chunk rankings equal up to float rounding. Ray actors run torch on one
    thread (num_cpus=1), so sums differ from a 2-thread process in the last bits, and two
    chunks whose scores tie within that rounding may swap places (or at the cut-off)."""
    a, b = comparable(a_folder), comparable(b_folder)
    assert [r["qid"] for r in a] == [r["qid"] for r in b]
    for x, y in zip(a, b, strict=True):
        assert {k: v for k, v in x.items() if k not in DERIVED | {"retrieved_chunk_ids",
                "retrieved_scores"}} == {k: v for k, v in y.items() if k not in DERIVED |
                {"retrieved_chunk_ids", "retrieved_scores"}}  # fmt: skip
        sx = dict(zip(x["retrieved_chunk_ids"], x["retrieved_scores"], strict=True))
        sy = dict(zip(y["retrieved_chunk_ids"], y["retrieved_scores"], strict=True))
        floor = min([*sx.values(), *sy.values()], default=0.0)
        for cid in sx.keys() | sy.keys():
            if cid in sx and cid in sy:
                assert sx[cid] == pytest.approx(sy[cid], rel=1e-4, abs=1e-7), x["qid"]
            else:  # a tie at the cut-off
                assert (sx.get(cid) or sy[cid]) == pytest.approx(floor, rel=1e-4, abs=1e-7)


@pytest.fixture(scope="module")
def local_runs(musique_subset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local")
    Engine(musique_subset["index"]).run_many(
        METHODS, musique_subset["questions"], out, retrieval_only=True, batch_size=BATCH
    )
    return out


def test_sharded_runs_equal_local_runs(cluster, musique_subset, local_runs, tmp_path) -> None:
    from graphrag_engine.api import RayPlacement

    runs = Engine(musique_subset["index"]).run_many(
        METHODS, musique_subset["questions"], tmp_path, retrieval_only=True, batch_size=BATCH,
        ray=RayPlacement(workers=2, question_pipeline=True),
    )  # fmt: skip
    for method, run in runs.items():
        assert run.summary["questions"] == 30 and run.summary["resumed_questions"] == 0
        assert_same_results(run.folder, local_runs / method)
        assert len(list((run.folder / "parts").glob("*.jsonl"))) == 8


def test_an_actor_killed_mid_run_is_replaced(cluster, musique_subset, local_runs, tmp_path):
    from graphrag_engine.query.ray_run import run_query_on_ray

    engine = Engine(musique_subset["index"])
    source, questions = engine.questions(musique_subset["questions"])
    cfg = engine.config("hipporag", retrieval_only=True, batch_size=BATCH)
    parts, written = tmp_path / "parts", {}
    killed: list[int] = []

    def kill_one_after_the_first_part(actors) -> None:
        pid = cluster.get(actors[1].pid.remote())

        def watch() -> None:
            while not any(parts.glob("*.jsonl")):
                time.sleep(0.01)
            written.update((p.name, p.stat().st_mtime_ns) for p in parts.glob("*.jsonl"))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        threading.Thread(target=watch, daemon=True).start()

    summary = run_query_on_ray(
        engine.index, questions, cfg, tmp_path, source, workers=2,
        on_start=kill_one_after_the_first_part,
    )  # fmt: skip
    assert killed and summary["questions"] == 30
    assert_same_results(tmp_path, local_runs / "hipporag")
    for name, mtime in written.items():  # a batch written before the kill is never redone
        assert (parts / name).stat().st_mtime_ns == mtime


def test_a_killed_driver_resumes(musique_subset, local_runs, tmp_path) -> None:
    pytest.importorskip("ray")
    out = tmp_path / "run"
    cmd = [
        sys.executable, "jobs/query_job.py", str(musique_subset["index"]),
        str(musique_subset["questions"]), "--method", "hipporag", "--out", str(out),
        "--retrieval-only", "--batch-size", "2", "--workers", "1",
    ]  # fmt: skip
    env = {**os.environ, "GRAPHRAG_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    root = REPO
    proc = subprocess.Popen(cmd, cwd=root, env=env, start_new_session=True)
    deadline = time.time() + 300
    while len(list((out / "parts").glob("*.jsonl"))) < 3 and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list((out / "parts").glob("*.jsonl")))
    assert 3 <= done < 15 and not (out / "results.parquet").exists()
    again = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_questions"] == 2 * done and summary["questions"] == 30
    assert_same_results(out, local_runs / "hipporag")
