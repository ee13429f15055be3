"""A multi-million-token build on this machine: every passage corpus of the shared data in one
index through the default (LLM-free) build, then the same build SIGKILLed about half way and
resumed, compared table by table with the uninterrupted one; then 1,000 questions through each
LLM-free method, as a user runs them.

    .venv/bin/python -m bench.big_build [--work /tmp/graphrag-big] [--kill-at 0.5]
                                        [--questions 1000] [--methods bm25,naive,...] [--tag TAG]

Every build and query is a `graphrag-engine` process of its own (progress bars on, as a user
sees them on a pipe: a line every five seconds at most); for each the bench records wall
seconds, the process's peak RSS (`wait4`'s, which counts its children too; sampled from /proc
every 0.2 s when the bench had held more, as a child's count starts at its parent's peak), the
manifest's seconds per stage, and the silences on stderr of 10 s or more. The
killed build is stopped at `--kill-at` times the uninterrupted build's wall time and re-run with
the same command; `store.compare.index_differences` lists what differs (empty: the same rows in
every table, the same vectors by id within 1e-5). Questions are the first distinct ones of the
multi-hop question files (`bench.gpu_pipeline.questions`), run `--retrieval-only` with each
method's LLM-free settings (`bench.llm_free.METHODS`).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import DATA, work_dir, write_result
from bench.gpu_pipeline import questions
from bench.llm_free import METHODS
from bench.scale import folder_mib
from graphrag_engine.store import open_index
from graphrag_engine.store.compare import index_differences

CORPORA = [
    "musique_corpus.jsonl",
    "musique_train_corpus.jsonl",
    "2wikimultihopqa_corpus.jsonl",
    "hotpotqa_corpus.jsonl",
    "hotpotqa_train_corpus.jsonl",
    "ultradomain_cs_corpus.jsonl",
    "ultradomain_mix_corpus.jsonl",
]
"""Every passage corpus of the shared data (MultiHop-RAG ships none; WebQSP is a graph)."""


def write_corpus(path: Path, limit: int | None = None) -> dict[str, int]:
    """Every passage of CORPORA (or each file's first `limit`) into one JSONL file, each (title,
    text) once; counts written."""
    seen: set[tuple[str, str]] = set()
    counts = {"passages": 0, "characters": 0}
    with open(path, "w", encoding="utf-8") as out:
        for name in CORPORA:
            with open(DATA / name, encoding="utf-8") as f:
                for line in itertools.islice(f, limit):
                    rec = json.loads(line)
                    key = (rec.get("title", ""), rec["text"])
                    if key in seen:
                        continue
                    seen.add(key)
                    rec["id"] = f"{name.removesuffix('_corpus.jsonl')}:{rec['id']}"
                    out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    counts["passages"] += 1
                    counts["characters"] += len(rec["text"])
    return counts


SILENT_S = 10.0
"""A silence on stderr this long or longer is listed (a bar should move more often)."""


@dataclasses.dataclass
class Child:
    """One engine process as the bench saw it."""

    seconds: float
    peak_rss_mib: float
    returncode: int
    longest_silence_s: float
    silence_ended_by: str
    silences: list[dict[str, Any]]
    """The ten longest silences of SILENT_S or more: the line before each and the one after."""
    last_line: str
    stderr_tail: str

    def figures(self) -> dict[str, Any]:
        """What goes in the result (the stderr tail stays out)."""
        out = dataclasses.asdict(self)
        out.pop("stderr_tail")
        return out


def high_water_kib(pid: str) -> int:
    """A process's peak resident memory (VmHWM, KiB); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_child(args: list[str], kill_after: float | None = None) -> Child:
    """Run `graphrag-engine ARGS` with its bars on, timestamping each stderr write; SIGKILL it
    after `kill_after` seconds when given."""
    env = {**os.environ, "GRAPHRAG_PROGRESS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "graphrag_engine.cli", *args]
    floor = high_water_kib("self")  # a child's ru_maxrss starts at this process's peak
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines: list[tuple[float, str]] = []
    sampled = [0]
    running = threading.Event()
    running.set()

    def sample() -> None:  # the child's own peak, read while it runs
        while running.is_set():
            sampled[0] = max(sampled[0], high_water_kib(str(proc.pid)))
            time.sleep(0.2)

    def read() -> None:  # a bar redraws with "\r" and no newline: each write is a line
        while chunk := os.read(proc.stderr.fileno(), 65536):
            now = time.perf_counter() - started
            done = chunk.replace(b"\r", b"\n").split(b"\n")
            lines.extend((now, d.decode("utf-8", "replace").strip()) for d in done if d.strip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    threading.Thread(target=sample, daemon=True).start()
    if kill_after is not None:
        timer = threading.Timer(kill_after, lambda: os.kill(proc.pid, signal.SIGKILL))
        timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    running.clear()
    # ru_maxrss covers the child's own children too, but not below this process's peak
    peak_kib = usage.ru_maxrss if usage.ru_maxrss > floor else sampled[0]
    proc.returncode = os.waitstatus_to_exitcode(status)
    if kill_after is not None:
        timer.cancel()
    reader.join()
    stamps = [0.0, *(t for t, _ in lines), seconds]
    gaps = [(b - a, i) for i, (a, b) in enumerate(itertools.pairwise(stamps))]
    gap, at = max(gaps)
    ended = [
        lines[i][1][:80] if i < len(lines) else "(the process ended)" for i in range(len(gaps))
    ]
    silent = sorted((g, i) for g, i in gaps if g >= SILENT_S)[::-1][:10]
    return Child(
        seconds=round(seconds, 1),
        peak_rss_mib=round(peak_kib / 1024, 1),
        returncode=proc.returncode,
        longest_silence_s=round(gap, 1),
        silence_ended_by=ended[at],
        silences=[
            {
                "seconds": round(g, 1),
                "after": ended[i - 1] if i else "(start)",
                "ended_by": ended[i],
            }
            for g, i in silent
        ],
        last_line=next((x for t, x in reversed(lines) if t <= (kill_after or seconds)), "")[:200],
        stderr_tail="\n".join(text for _, text in lines[-20:]),
    )


def build(corpus: Path, out: Path, kill_after: float | None = None) -> Child:
    """`graphrag-engine index CORPUS --out OUT` with the default config; a failed run (not the
    kill) ends the bench."""
    child = run_child(["index", str(corpus), "--out", str(out)], kill_after)
    if child.returncode != 0 and kill_after is None:
        raise SystemExit(f"index {out} failed ({child.returncode}):\n{child.stderr_tail}")
    return child


def build_figures(child: Child, index: Path) -> dict[str, Any]:
    """A finished build's process figures with its manifest's counts and seconds per stage."""
    manifest = json.loads((index / "manifest.json").read_text())
    stages = manifest["stats"]["stages"]
    ingest = stages["ingest_chunk"]
    return {
        **child.figures(),
        "index_mib": folder_mib(index),
        "documents": ingest["items"],
        "chunks": ingest["chunks"],
        "tokens": ingest["tokens"],
        "tokens_per_s": round(ingest["tokens"] / child.seconds, 1),
        "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
        "stage_cache": {
            k: {c: n for c, n in v.items() if c in ("embedded", "cached")}
            for k, v in stages.items()
            if "cached" in v
        },
    }


def query_figures(index: Path, name: str, asked: Path, n: int, work: Path) -> dict[str, Any]:
    """Bench method `name` over the `n` questions of `asked` through `graphrag-engine query`."""
    method, settings = METHODS[name]
    cfg = work / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump({"method": method, **({method: settings} if settings else {})}))
    out = work / name
    args = ["query", str(index), str(asked), "--method", str(cfg), "--retrieval-only"]
    child = run_child([*args, "--out", str(out)])
    if child.returncode != 0:
        return {"error": child.stderr_tail[-500:], **child.figures()}
    return {**child.figures(), "questions_per_s": round(n / child.seconds, 1)}


def kill_and_resume(
    corpus: Path, work: Path, kill_after: float, figures: dict[str, Any], log: Any
) -> None:
    """Build into work/killed, SIGKILL it after `kill_after` s, re-run it; compare with clean."""
    killed = build(corpus, work / "killed", kill_after=kill_after)
    figures["killed"] = {"after_s": round(kill_after, 1), **killed.figures()}
    log("killed", figures["killed"])
    resumed = build(corpus, work / "killed")
    figures["resumed"] = build_figures(resumed, work / "killed")
    log("resumed", figures["resumed"])
    differences = index_differences(open_index(work / "clean"), open_index(work / "killed"))
    figures["resumed_equals_clean"] = {"same": not differences, "differences": differences}
    log("resumed_equals_clean", figures["resumed_equals_clean"])


def main() -> None:
    """Build, kill and resume, compare, then time the questions; print and write the result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path(work_dir("big")))
    ap.add_argument(
        "--kill-at", type=float, default=0.5, help="share of the clean build's time (0: no kill)"
    )
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--limit", type=int, help="each corpus's first N passages (a quick check)")
    ap.add_argument("--tag", default="", help="result file bench/results/big_build-TAG.json")
    args = ap.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)

    def log(what: str, value: Any) -> None:
        print(json.dumps({what: value}), file=sys.stderr, flush=True)

    corpus = work / "corpus.jsonl"
    figures: dict[str, Any] = {"corpora": CORPORA, "corpus": write_corpus(corpus, args.limit)}
    log("corpus", figures["corpus"])
    for name in ("clean", "killed"):
        subprocess.run(["rm", "-rf", str(work / name)], check=True)
    clean = build(corpus, work / "clean")
    figures["clean"] = build_figures(clean, work / "clean")
    log("clean", figures["clean"])
    if args.kill_at > 0:
        kill_and_resume(corpus, work, args.kill_at * clean.seconds, figures, log)

    asked = work / "questions.jsonl"
    qs = questions(args.questions)
    asked.write_text("".join(json.dumps(dataclasses.asdict(q)) + "\n" for q in qs))
    runs = work / "runs"
    subprocess.run(["rm", "-rf", str(runs)], check=True)
    runs.mkdir()
    figures["questions"] = len(qs)
    figures["methods"] = {}
    for name in args.methods.split(","):
        figures["methods"][name] = query_figures(work / "clean", name, asked, len(qs), runs)
        log(name, figures["methods"][name])
    tokens = figures["clean"]["tokens"]
    print(f"corpus: {figures['corpus']}, tokens {tokens}")
    for what in ("clean", "resumed"):
        if what not in figures:
            continue
        row = figures[what]
        print(
            f"{what}: {row['seconds']} s, peak {row['peak_rss_mib']} MiB, silent at most "
            f"{row['longest_silence_s']} s; stages {row['stage_seconds']}"
        )
    if "killed" in figures:
        print(f"killed after {figures['killed']['after_s']} s at: {figures['killed']['last_line']}")
        print(f"resumed equals clean: {figures['resumed_equals_clean']}")
    for name, row in figures["methods"].items():
        print(f"{name:>26}: {row.get('questions_per_s')} q/s, {row['peak_rss_mib']} MiB")
    write_result("big_build", figures, tag=args.tag)


if __name__ == "__main__":
    main()
