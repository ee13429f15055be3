"""The Ray job entry points and the KubeRay manifest: each job script is the CLI command it
names, and the RayJob's entrypoint runs a script the image holds with arguments the CLI takes."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
import yaml

from graphrag_engine.cli import build_parser
from tests.paths import REPO

JOBS = {"index_job.py": "index", "reindex_job.py": "reindex", "query_job.py": "query"}
JOBS["eval_job.py"] = "eval"


@pytest.mark.parametrize("script", sorted(JOBS))
def test_each_job_is_its_cli_command(script: str) -> None:
    done = subprocess.run(
        [sys.executable, f"jobs/{script}", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert f"graphrag-engine {JOBS[script]}" in done.stdout.splitlines()[0]


def test_kuberay_manifest_runs_the_reindex_job() -> None:
    manifest = yaml.safe_load((REPO / "jobs" / "kuberay-reindex.yaml").read_text())
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["kind"] == "RayJob"
    spec = manifest["spec"]
    python, script, *args = shlex.split(spec["entrypoint"])
    assert python == "python" and script == "/opt/graphrag-engine/jobs/reindex_job.py"
    assert "COPY jobs ./jobs" in (REPO / "Dockerfile.cuda").read_text()
    assert "WORKDIR /opt/graphrag-engine" in (REPO / "Dockerfile.cuda").read_text()
    parsed = build_parser().parse_args(["reindex", *args])
    assert parsed.executor == "ray" and parsed.out == "/data/index"
    assert spec["shutdownAfterJobFinishes"] is True
    cluster = spec["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]] + [
        g["template"] for g in cluster["workerGroupSpecs"]
    ]
    for pod in pods:  # every pod sees the source and the index on the same shared volume
        (container,) = pod["spec"]["containers"]
        assert container["image"] == "graphrag-engine:cuda"
        assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
        assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "graphrag-data"
    workers = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert workers["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_query_on_ray_refuses_bad_placements(tmp_path, capsys) -> None:
    from graphrag_engine.cli import main

    base = ["query", "none", "demo", "--method", "none", "--out", str(tmp_path / "r")]
    assert main([*base, "--executor", "ray", "--workers", "0"]) == 2
    assert "--workers: give at least 1" in capsys.readouterr().err
    assert main([*base, "--executor", "ray", "--gpus-per-worker", "-1"]) == 2
    assert "--gpus-per-worker: give 0 or more" in capsys.readouterr().err
    assert not (tmp_path / "r" / "run.json").exists()
