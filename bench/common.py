"""What the benches share: where the data, work folders and results are, the dev question
sets, an index built in a child process, timing, a description of the machine, and the JSON
result each bench writes to bench/results/ (the tables in docs/benchmarks/ are generated from
those files by `python -m bench.tables`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHRAG_BENCH_DATA", REPO.parent / "shared" / "data"))
"""../shared/data: the real evaluation sets (never copied into the repository); a machine that
cannot see it (a lent GPU machine) points GRAPHRAG_BENCH_DATA at a copy carried there."""
RESULTS = Path(os.environ.get("GRAPHRAG_BENCH_RESULTS", REPO / "bench" / "results"))
"""Where results are kept (tests point GRAPHRAG_BENCH_RESULTS elsewhere)."""
WORK = Path(os.environ.get("GRAPHRAG_BENCH_WORK", "/tmp/graphrag-bench"))
"""Where a bench keeps its indexes and runs unless `--work` says otherwise."""

DEV_SETS = {  # name: (corpus file, dev question file) under DATA
    "musique": ("musique_corpus.jsonl", "musique_dev.jsonl"),
    "2wiki": ("2wikimultihopqa_corpus.jsonl", "2wikimultihopqa_dev.jsonl"),
    "hotpotqa": ("hotpotqa_corpus.jsonl", "hotpotqa_dev.jsonl"),
}
QUESTIONS = {name: questions for name, (_, questions) in DEV_SETS.items()}
"""The dev question file of each multi-hop set."""


def work_dir(name: str) -> str:
    """The default `--work` folder of a bench (shared by benches that reuse one index)."""
    return str(WORK / name)


def offline_work(args: Any) -> Path:
    """The parsed `--work` folder, created, with model downloads switched off for the run."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    return work


def read_jsonl(path: Path, n: int | None = None) -> list[dict]:
    """The first `n` records (all when None) of a JSONL file."""
    out: list[dict] = []
    with path.open() as f:
        for line in f:
            if n is not None and len(out) == n:
                break
            out.append(json.loads(line))
    return out


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(result, seconds) of one call."""
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


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
    cmd = [sys.executable, "-m", "graphrag_engine.cli", "index", str(corpus), "--out", str(out)]
    cmd += ["--config", str(config), *(extra or [])]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"index failed ({proc.returncode}): {proc.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    manifest = json.loads((out / "manifest.json").read_text())
    return {
        "seconds": seconds,
        "peak_rss_mb": after / 1024 if after > before else None,
        "manifest": manifest,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


MATRIX_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
"""The CPU flags that decide how fast a CPU runs a model (bf16 units: avx512_bf16, amx_*)."""


def _cpu_flags() -> list[str]:
    """Which of MATRIX_FLAGS the CPU has (Linux; empty elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return [f for f in MATRIX_FLAGS if f in have]
    except OSError:
        pass
    return []


def machine() -> dict[str, Any]:
    """The machine a figure was measured on: CPU, cores, memory, load, GPU, library versions."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "cpu_flags": _cpu_flags(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages * size / 2**30, 1)
    except (ValueError, OSError):
        pass
    torch = sys.modules.get("torch")  # described only when the bench loaded it
    if torch is not None:
        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    return info


NOT_CODE = ("bench/results/", "docs/", "README.md", "CHANGELOG.md")
"""Paths whose edits do not change what a bench measures (a result being written, the pages
generated from it); any other changed or untracked file (not ignored) marks a result."""


def _git(*args: str) -> str | None:
    """What a git command prints in the repository, or None when git cannot answer."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def code_state() -> dict[str, Any]:
    """The exact commit this tree's code is at and the code files it changes or adds, if any.

    A copy of the tree without .git (a lent GPU machine) names its commit in
    GRAPHRAG_BENCH_COMMIT, which the packer (bench/gpu_carry.py) sets only for a clean tree."""
    if os.environ.get("GRAPHRAG_BENCH_COMMIT"):
        return {"commit": os.environ["GRAPHRAG_BENCH_COMMIT"], "uncommitted": []}
    head = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=all")  # a new module counts too
    if head is None or status is None:
        return {"commit": "unknown", "uncommitted": []}
    changed = [line[3:] for line in status.splitlines() if line[3:]]
    return {
        "commit": head.strip(),
        "uncommitted": sorted(f for f in changed if not f.startswith(NOT_CODE)),
    }


RECORD_KEYS = ("bench", "tag", "command", "commit", "uncommitted", "date", "machine", "figures")
"""The keys write_result writes, besides its seal; a result with any other key was edited."""


def seal(record: dict[str, Any]) -> str:
    """The digest write_result keeps in a result: SHA-256 of its other keys, so that a figure,
    commit or date changed by hand no longer matches (`bench.tables --check` recomputes it)."""
    body = {k: record[k] for k in RECORD_KEYS if k in record}
    text = json.dumps(body, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_result(bench: str, figures: dict[str, Any], tag: str = "") -> Path:
    """Print `figures` as one JSON line and keep them, with the command, exact commit, date and
    machine, in bench/results/<bench>[-<tag>].json (written atomically). A tree with uncommitted
    changes to tracked code is recorded as such (`uncommitted`: the files), and
    `python -m bench.tables --check` fails on that result until it is re-run from a commit."""
    print(json.dumps({"bench": bench, **figures}), flush=True)
    state = code_state()
    if state["uncommitted"]:
        print(
            f"warning: {len(state['uncommitted'])} tracked code files differ from commit "
            f"{state['commit'][:12]} ({', '.join(state['uncommitted'][:5])}); the result says "
            "so and bench.tables --check fails on it: commit first, then run the bench",
            file=sys.stderr,
        )
    record = {
        "bench": bench,
        "tag": tag,
        "command": " ".join(["python -m", f"bench.{bench}", *sys.argv[1:]]),
        **state,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "figures": figures,
    }
    record = json.loads(json.dumps(record, default=str))  # sealed as it will be read back
    record["seal"] = seal(record)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{bench}{'-' + tag if tag else ''}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str) + "\n")
    tmp.replace(path)
    print(f"result: {path}", file=sys.stderr)
    return path
