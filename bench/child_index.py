"""Shared by the bench scripts: run `graphrag-engine index` in a fresh child process and
measure its wall time and peak RSS."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def index_in_child(
    corpus: Path, out: Path, config_text: str, extra: list[str] | None = None
) -> dict:
    """Index `corpus` into a fresh `out` with the given YAML config in a child process.

    Returns seconds, peak RSS in MiB (exact when this child set a new maximum of
    RUSAGE_CHILDREN; children are measured in the order they run) and the manifest.
    """
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    config = out.parent / f"{out.name}.yaml"
    config.write_text(config_text)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    env = {**os.environ, "GRAPHRAG_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    cmd = [
        sys.executable,
        "-m",
        "engine.cli",
        "index",
        str(corpus),
        "--out",
        str(out),
        "--config",
        str(config),
    ]
    subprocess.run(
        cmd + list(extra or []), check=True, env=env, stdout=subprocess.DEVNULL, cwd=REPO
    )
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "seconds": seconds,
        "peak_rss_mib": round(max(peak, before) / 1024, 1),
        "peak_rss_exact": peak > before,
        "manifest": json.loads((out / "manifest.json").read_text()),
    }
