"""README command 1's demo, timed: `graphrag-engine demo` run as a user runs it (a child process,
a fresh output folder), its printed output kept line for line (the README's demo excerpt is
written from it by `python -m bench.tables`), and each method's seconds by stage from its run
folder, with the machine's load before and after.

    python -m bench.demo [--work DIR] [--questions N]
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


def main() -> None:
    """Run the demo in a child process and keep its output and timings."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=work_dir("demo"))
    ap.add_argument("--questions", type=int, default=None, help="the demo's --questions")
    args = ap.parse_args()
    work = offline_work(args)
    out = work / "demo"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "graphrag_engine.cli", "demo", "--out", str(out)]
    if args.questions is not None:
        cmd += ["--questions", str(args.questions)]
    env = {**os.environ, "GRAPHRAG_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    load_before = round(os.getloadavg()[0], 2)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"demo failed ({proc.returncode}): {proc.stderr[-2000:]}")
    output = [line.replace(str(out), "demo").rstrip() for line in proc.stdout.splitlines()]
    print("\n".join(output))
    write_result(
        "demo",
        {
            "command": COMMAND,
            "seconds": round(seconds, 1),
            "load_average_1m_before": load_before,
            "output": ["```text", f"$ .venv/bin/{COMMAND}", *output, "```"],
            "methods": method_seconds(out / "runs"),
        },
    )


if __name__ == "__main__":
    main()
