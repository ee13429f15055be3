"""Scale curves: index time, peak RSS and index size of LLM-free indexes at 1x, 4x and 16x
MuSiQue's corpus, and retrieval questions/s against index size; prints a table and a JSON line
and writes a plot.

    .venv/bin/python -m bench.scale [--scales 1,4,16] [--work /tmp/graphrag-scale]
                                    [--methods bm25,naive,...] [--questions 200]
                                    [--device cpu|cuda] [--tag TAG] [--repeats N]
                                    [--previous LOG]  # rows of an earlier run join the table

A corpus of scale s holds real passages up to s times the characters of MuSiQue's corpus:
MuSiQue, MuSiQue train, 2WikiMultiHopQA, HotpotQA and HotpotQA train passages in that order,
exact duplicates dropped (19,628 passages, 6.2x MuSiQue's characters). Past that the pool is
repeated, each copy with a changed id and title ("(copy k)"), since the engine drops documents
with the same title and text: copies repeat sentence units and entity names, which the index
embeds once, so a point made of copies is cheaper than new text would be (the table says how
many passages are copies). Every index is a fresh `graphrag-engine index` process (alpha 0, no
LLM, the embedder on `--device`); questions/s are MuSiQue's dev questions run through each
LLM-free method of bench/llm_free.py in process (vector search and PPR on `--device` too),
models loaded and warmed before timing, with each method's milliseconds per question by stage;
a method that answers the questions in under a second (BM25: a few milliseconds) is timed over
as many rounds of them as fill one.
Every scale is built first and then timed `--repeats` times (3), the scales taking turns;
each method keeps its median pass (on a shared machine one pass can run 40% slow, and the
fastest pass of a few is a lucky one; issue 70's scale ratios are medians of three or more).
`--repeats 1` times each scale as soon as it is built.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench.common import DATA, REPO, index_in_child, work_dir, write_result
from bench.llm_free import METHODS, method_config, time_method
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.store import open_index

POOL = [
    "musique_corpus.jsonl",
    "musique_train_corpus.jsonl",
    "2wikimultihopqa_corpus.jsonl",
    "hotpotqa_corpus.jsonl",
    "hotpotqa_train_corpus.jsonl",
]


def passages() -> list[dict]:
    """The pool's passages in order, each (title, text) once."""
    seen, out = set(), []
    for name in POOL:
        with open(DATA / name, encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                key = (rec.get("title", ""), rec["text"])
                if key not in seen:
                    seen.add(key)
                    out.append(
                        {"id": rec["id"], "title": rec.get("title", ""), "text": rec["text"]}
                    )
    return out


def write_corpus(pool: list[dict], target_chars: int, path: Path) -> dict:
    """Passages up to target_chars (repeating the pool as changed copies); counts written."""
    written = chars = copies = 0
    with open(path, "w", encoding="utf-8") as f:
        while chars < target_chars:
            k = written // len(pool)
            rec = dict(pool[written % len(pool)])
            if k:
                rec["id"] = f"{rec['id']}#copy{k}"
                rec["title"] = f"{rec['title']} (copy {k})"
                copies += 1
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            written += 1
            chars += len(rec["text"])
    return {"passages": written, "copies": copies, "characters": chars}


def folder_mib(path: Path) -> float:
    """Size of every file under path, MiB."""
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def query_rates(
    index_dir: Path, methods: list[str], n_questions: int, work: Path, device: str = "cpu"
) -> tuple[dict, dict]:
    """Questions/s of each LLM-free method (bench/llm_free.py) on MuSiQue dev questions, warmed
    up first, and each method's seconds per question by stage."""
    index = open_index(index_dir)
    questions = load_questions(DATA / "musique_dev.jsonl", limit=n_questions)
    rates, stages = {}, {}
    for name in methods:
        ctx = QueryContext(index, method_config(name, device), work / "runs" / name)
        timing = time_method(ctx, questions, min_seconds=1.0)
        rates[name] = round(timing.rate, 1)
        stages[name] = {
            k: round(1000 * v / timing.questions, 3) for k, v in timing.stage_seconds.items()
        }
    return rates, stages


def median_passes(
    built: list[tuple[dict, Path]], methods: list[str], n_questions: int, repeats: int, device: str
) -> None:
    """Time every built index `repeats` times, the scales taking turns, so that a slow spell of
    a shared machine falls on each scale alike; each method's row keeps its median pass (q/s,
    and that pass's stage ms), with every pass's q/s beside it."""
    passes: list[list[tuple[dict, dict]]] = [[] for _ in built]
    for _ in range(repeats):
        for i, (row, index) in enumerate(built):
            qps, stage_ms = query_rates(index, methods, n_questions, index, device)
            row.setdefault("qps_passes", []).append(qps)
            passes[i].append((qps, stage_ms))
    for (row, _), timed in zip(built, passes, strict=True):
        row["qps"], row["stage_ms_per_question"] = {}, {}
        for name in methods:
            ranked = sorted(timed, key=lambda p, name=name: p[0][name])
            qps, stage_ms = ranked[(len(ranked) - 1) // 2]  # the lower median of an even count
            row["qps"][name], row["stage_ms_per_question"][name] = qps[name], stage_ms[name]


def earlier_rows(log: Path) -> list[dict]:
    """The scale rows an earlier run printed (one JSON object per line starting with "scale")."""
    with open(log, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.startswith('{"scale"')]


def plot(rows: list[dict], path: Path) -> None:
    """Index seconds, peak RSS and index size against corpus characters; q/s against size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["characters"] / 1e6 for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (
        ("seconds", "index seconds"),
        ("peak_rss_mib", "peak RSS, MiB"),
        ("index_mib", "index size, MiB"),
    ):
        axes[0].plot(x, [r[key] for r in rows], marker="o", label=label)
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("corpus, million characters")
    axes[0].legend()
    for name in rows[0]["qps"]:
        axes[1].plot(
            [r["index_mib"] for r in rows], [r["qps"][name] for r in rows], marker="o", label=name
        )
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("index size, MiB")
    axes[1].set_ylabel("questions/s")
    axes[1].legend()
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    for ax in axes:  # plain numbers at 1, 2, 5 x 10^k on the log axes
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def summary_rows(rows: list[dict]) -> list[dict]:
    """One row per scale: corpus, index seconds and each method's questions/s, then each
    method's q/s at the largest scale as a share of the smallest's."""
    out = [
        {
            "scale": r["scale"],
            "M chars": round(r["characters"] / 1e6, 2),
            "index s": r["seconds"],
            **r["qps"],
        }
        for r in rows
    ]
    if len(rows) > 1:
        first, last = rows[0]["qps"], rows[-1]["qps"]
        share = {m: round(last[m] / first[m], 2) for m in first if m in last and first[m]}
        out.append({"scale": f"{rows[-1]['scale']:g}x / {rows[0]['scale']:g}x", **share})
    return out


def main() -> None:
    """Build and index each scale, measure it, print a table and a JSON line, save the plot."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="1,4,16")
    ap.add_argument("--work", default=work_dir("scale"))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--device", default="cpu", help="the embedder's, vector search's and PPR's")
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument(
        "--repeats", type=int, default=3, help="timing passes, alternating scales; the median kept"
    )
    ap.add_argument("--tag", default="", help="result file bench/results/scale-TAG.json")
    ap.add_argument("--plot", default=str(REPO / "bench" / "out" / "scale.png"))
    ap.add_argument(
        "--previous",
        type=Path,
        help="a log of an earlier run: its scale rows (JSON lines) join this run's table and plot",
    )
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    pool = passages()
    with open(DATA / POOL[0], encoding="utf-8") as f:
        unit = sum(len(json.loads(line)["text"]) for line in f)
    rows = earlier_rows(args.previous) if args.previous else []
    built = []
    for scale in (float(s) for s in args.scales.split(",")):
        name = f"x{scale:g}"
        corpus = work / f"{name}.jsonl"
        counts = write_corpus(pool, int(scale * unit), corpus)
        config = f"graph:\n  alpha: 0.0\nmodels:\n  embedder:\n    device: {args.device}\n"
        run = index_in_child(corpus, work / name, config)
        stages = run["manifest"]["stats"]["stages"]
        row = {
            "scale": scale,
            **counts,
            "seconds": round(run["seconds"], 1),
            "peak_rss_mib": run["peak_rss_mb"],
            "index_mib": folder_mib(work / name),
            "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
        }
        if args.repeats == 1:  # timed as soon as it is built, as before
            row["qps"], row["stage_ms_per_question"] = query_rates(
                work / name, args.methods.split(","), args.questions, work / name, args.device
            )
            print(json.dumps(row), file=sys.stderr, flush=True)
        built.append((row, work / name))
    if args.repeats > 1:
        median_passes(built, args.methods.split(","), args.questions, args.repeats, args.device)
        for row, _ in built:
            print(json.dumps(row), file=sys.stderr, flush=True)
    rows += [row for row, _ in built]
    rows.sort(key=lambda r: r["scale"])
    print(
        f"{'scale':>6}{'passages':>10}{'copies':>8}{'M chars':>9}{'index s':>9}{'s/M chars':>10}"
        f"{'RSS MiB':>9}{'idx MiB':>9}  q/s"
    )
    for r in rows:
        per = r["seconds"] / (r["characters"] / 1e6)
        print(
            f"{r['scale']:>6g}{r['passages']:>10}{r['copies']:>8}{r['characters'] / 1e6:>9.2f}"
            f"{r['seconds']:>9}{per:>10.1f}{r['peak_rss_mib'] or '-':>9}{r['index_mib']:>9}  {r['qps']}"
        )
    plot(rows, Path(args.plot))
    figures = {"device": args.device, "questions_per_s": summary_rows(rows), "rows": rows}
    write_result("scale", figures, tag=args.tag)


if __name__ == "__main__":
    main()
