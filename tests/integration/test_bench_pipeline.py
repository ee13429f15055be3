"""The prepared GPU run on CPU, on a slice: `gpu_carry pack` packs what a lent GPU machine needs
within one call's limit, and `gpu_run.sh`'s CPU path reads only what was packed and writes
bench.model_rates' and bench.gpu_pipeline's results (index tokens/s per stage and every
LLM-free method's q/s)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.llm_free import METHODS
from tests.paths import REPO

DOCS = 80
"""Passages of each corpus packed (MuSiQue's whole corpus has 3,141)."""


@pytest.fixture(scope="module")
def prepared_run(tmp_path_factory) -> dict:
    """`gpu_carry pack` on a slice, then `DEVICE=cpu bash bench/gpu_run.sh` on what it packed."""
    tmp = tmp_path_factory.mktemp("gpu_run")
    env = {
        **os.environ,
        "GRAPHRAG_GPU_CARRY": str(tmp / "repo" / ".gpu"),
        "GRAPHRAG_GPU_THERE": str(tmp / "there"),
        "HF_HUB_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # python3: this one
    }
    pack = [sys.executable, "-m", "bench.gpu_carry", "pack", "--docs", str(DOCS)]
    pack += ["--cosine-texts", "20", "--dirty-ok"]
    packed = subprocess.run(pack, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert packed.returncode == 0, packed.stderr[-3000:]
    out = tmp / "out"
    out.mkdir()
    run_env = {
        **env,
        "OUT": str(out),
        "DEVICE": "cpu",
        "RATES_ARGS": "--docs 40",
        "PIPELINE_ARGS": f"--questions 8 --work {tmp / 'work'}",
        "SCALE_ARGS": "",
    }
    ran = subprocess.run(
        ["bash", "bench/gpu_run.sh"],
        cwd=REPO,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return {"tmp": tmp, "env": env, "out": out, "pack": packed.stdout, "run": ran}


def test_what_one_call_carries_is_within_its_limit(prepared_run) -> None:
    carried = re.search(r"one call carries ([\d.]+) MiB", prepared_run["pack"])
    assert carried and float(carried.group(1)) < 64, prepared_run["pack"]
    cosine = re.search(r"'min': ([\d.]+)", prepared_run["pack"])
    assert cosine and float(cosine.group(1)) >= 0.9999  # the rebuilt weights' vectors
    ignored = subprocess.run(["git", "check-ignore", "-q", ".gpu/site.tar.xz"], cwd=REPO)
    assert ignored.returncode == 0, ".gpu/ must be ignored by git"


def test_the_run_reads_only_what_was_packed(prepared_run) -> None:
    ran, out, tmp = prepared_run["run"], prepared_run["out"], prepared_run["tmp"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert str(tmp / "there" / "gpu-site") in (out / "from.txt").read_text()
    rates = json.loads((out / "model_rates-cpu.json").read_text())["figures"]["build"]
    assert rates["documents"] == 40 and rates["cosine_to_float32"]["min"] >= 0.9999
    assert rates["x_bare_forward"] > 0.5 and rates["tokens_embedded"] > 1000
    index = json.loads((out / "gpu_pipeline-cpu.json").read_text())["figures"]["index"]
    assert index["documents"] == DOCS  # the packed slice, not the corpus beside the repository


def test_pipeline_bench_on_cpu_writes_every_figure(prepared_run) -> None:
    assert prepared_run["run"].returncode == 0, prepared_run["run"].stderr[-3000:]
    tmp, out = prepared_run["tmp"], prepared_run["out"]
    rec = json.loads((out / "gpu_pipeline-cpu.json").read_text())
    fig = rec["figures"]
    index = fig["index"]
    assert index["documents"] == DOCS and index["tokens"] > 5000
    assert set(index["stage_seconds"]) >= {"ingest_chunk", "embed_chunks", "ner", "embed"}
    assert index["tokens_per_s"] > 0 and index["gpu_peak_mib"] is None
    assert fig["questions"] == 8 and set(fig["methods"]) == set(METHODS)
    for name, row in fig["methods"].items():
        assert "error" not in row, (name, row)
        assert row["cpu"]["questions"] == 8 and row["cpu"]["questions_per_s"] > 0, name
        assert row["cpu"]["stage_seconds"], name
    table = {r["method"]: r for r in fig["methods_table"]}
    assert list(table) == list(METHODS)
    assert fig["index_stages"][-1]["stage"] == "whole index"
    assert table["naive"]["x dense"] == 1.0
    for name, row in table.items():
        assert row["x dense"] == round(row["cpu q/s"] / table["naive"]["cpu q/s"], 3), name
        assert set(row["ms/question by stage"]) == set(fig["methods"][name]["cpu"]["stage_seconds"])
    # a second run keeps the index the first built, with the figures its build recorded
    env = {**prepared_run["env"], "GRAPHRAG_BENCH_RESULTS": str(out)}
    env["GRAPHRAG_BENCH_DATA"] = str(tmp / "there" / "gpu-data")
    again = [sys.executable, "-m", "bench.gpu_pipeline", "--device", "cpu", "--questions", "8"]
    again += ["--work", str(tmp / "work"), "--tag", "t2", "--reuse-index", "--methods", "bm25"]
    proc = subprocess.run(again, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kept = json.loads((out / "gpu_pipeline-t2.json").read_text())["figures"]
    built, reused = dict(index["stage_seconds"]), dict(kept["index"]["stage_seconds"])
    assert built.pop("line_tokens") > 0 and "line_tokens" in reused  # counted, then read again
    reused.pop("line_tokens")
    assert kept["index"]["reused"] and reused == built
    assert "x dense" not in kept["methods_table"][0]  # no dense run to set it against
