"""The README's headline results, written from bench/results/ by `python -m bench.tables`.

Three small tables, each from one result of the current code, with the command, commit and
machine that made it: every LLM-free method on the three dev sets over the default index
(the text graph bench's `defaults` run); retrieval quality of PankRAG beside the baselines on
MuSiQue dev over the same kind of index (the PankRAG bench); and questions/s of every LLM-free
method on a GPU against the same machine's CPU cores (the GPU pipeline bench). The README
holds the text between its two markers; `python -m bench.tables --check` fails when that text
is stale.

The README's demo excerpt is written the same way, between its own markers, from the output that
`python -m bench.demo` kept of a real `graphrag-engine demo` run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import REPO, RESULTS

README = REPO / "README.md"
START = "<!-- headline: written by `python -m bench.tables` from bench/results/; do not edit -->"
END = "<!-- /headline -->"
QUALITY = "pankrag.json"
"""A result whose rows are methods on one question set and index."""
THROUGHPUT = "gpu_pipeline-cuda.json"
TEXT_GRAPH = ("text_graph-defaults.json", "text_graph.json")
"""Today's default index on the three dev sets (`--configs sentences --tag defaults`), or, until
that run is written, the newest run that built the default index beside the old one."""
SET_NAMES = {"musique": "MuSiQue", "2wiki": "2Wiki", "hotpotqa": "HotpotQA"}
DEMO = "demo.json"
DEMO_START = (
    "<!-- demo: written by `python -m bench.tables` from bench/results/demo.json; do not edit -->"
)
DEMO_END = "<!-- /demo -->"


def _machine(m: dict[str, Any]) -> str:
    gpu = f", {m['gpu']}" if m.get("gpu") else ""
    return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores{gpu}"


def _source(rec: dict[str, Any]) -> str:
    """Where a result came from: its command, commit and machine (its date is on its page)."""
    return f"From `{rec['command']}` at {rec['commit'][:12]} ({_machine(rec['machine'])})."


def _quality(results: Path) -> list[str]:
    """Recall@2 and @5 with intervals, one row per distinct method, best R@5 first."""
    path = results / QUALITY
    if not path.exists():
        return []
    rec = json.loads(path.read_text())
    rows: dict[str, dict] = {}
    for row in rec["figures"].get("rows", []):
        label = row["method"].strip()
        if row.get("R@5") is not None and not label.startswith(("-", "gold plans,")):
            rows.setdefault(label, row)
    if not rows:
        return []
    first = next(iter(rows.values()))
    out = [
        f"Retrieval on MuSiQue dev, first {first['questions']} questions, over the default "
        "LLM-free index (MiniLM vectors, spaCy entities with their sentences, no LLM at "
        "indexing); mean Recall@k of the gold passages, 95% bootstrap interval:",
        "",
        "| method | Recall@2 | Recall@5 |",
        "| --- | --- | --- |",
    ]
    for label, r in sorted(rows.items(), key=lambda kv: -kv[1]["R@5"]):
        cells = [
            f"{r[k]:.3f} [{r[k + '_ci'][0]:.3f}, {r[k + '_ci'][1]:.3f}]" for k in ("R@2", "R@5")
        ]
        out.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return [*out, "", _source(rec)]


def _throughput(results: Path) -> list[str]:
    """Questions/s per LLM-free method on the GPU and on the same machine's CPU cores."""
    path = results / THROUGHPUT
    if not path.exists():
        return []
    rec = json.loads(path.read_text())
    fig = rec["figures"]
    out = [
        f"Throughput of the LLM-free methods on {fig['questions']:,} MuSiQue questions "
        f"({_machine(rec['machine'])}); the index of MuSiQue's corpus "
        f"({fig['index']['tokens']:,} tokens) built at {fig['index']['tokens_per_s']:,.0f} "
        "tokens/s on the GPU:",
        "",
        "| method | GPU q/s | CPU q/s (same machine) | GPU / CPU | top-5 identical |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in fig["methods_table"]:
        out.append(
            f"| {row['method']} | {row['cuda q/s']:,.0f} | {row['cpu q/s']:,.0f} | "
            f"{row['x cpu']:.2f} | {row['top-5 identical']:.2f} |"
        )
    return [*out, "", _source(rec)]


def _text_graph(results: Path) -> list[str]:
    """R@5 of every method on each dev set over the default LLM-free index and its share of
    dense's; then the best graph method against the best baseline."""
    path = next((results / n for n in TEXT_GRAPH if (results / n).exists()), None)
    if path is None:
        return []
    rec = json.loads(path.read_text())
    fig = rec["figures"]
    rows = [r for r in fig["recall"] if r["index"] == "sentences"]
    sets = list(dict.fromkeys(r["set"] for r in rows))
    cell = {(r["set"], r["method"]): r for r in rows}
    out = [
        "Every LLM-free method on the three dev sets, over the default index (entities and "
        "relations carry their sentences; `docs/indexing.md`): Recall@5 and its share of "
        "dense's:",
        "",
        "| method | " + " | ".join(SET_NAMES.get(s, s) for s in sets) + " |",
        "| --- |" + " --- |" * len(sets),
    ]
    for m in dict.fromkeys(r["method"] for r in rows):
        cells = [
            f"{c['R@5']:.3f} ({c['of_dense_R@5']:.2f}x)" if (c := cell.get((s, m))) else ""
            for s in sets
        ]
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    best = [
        f"{SET_NAMES.get(b['set'], b['set'])} {100 * b['mean_diff']:+.1f} points "
        f"[{100 * b['ci_low']:.1f}, {100 * b['ci_high']:.1f}] ({b['best_graph']} against "
        f"{b['best_baseline']})"
        for b in fig["best_graph_minus_baseline"]
    ]
    out += [
        "",
        "Best graph method minus best baseline, Recall@5, paired bootstrap interval: "
        + "; ".join(best)
        + ".",
        "",
        _source(rec),
    ]
    return out


def headline(results: Path = RESULTS) -> str:
    """The text between the README's markers."""
    parts = [_text_graph(results), _quality(results), _throughput(results)]
    body = [line for part in parts if part for line in [*part, ""]]
    return "\n".join([START, "", *body, END])


def demo_excerpt(results: Path = RESULTS) -> str:
    """The text between the README's demo markers: the kept output of `python -m bench.demo`
    and where it ran."""
    path = results / DEMO
    if not path.exists():
        return "\n".join(
            [DEMO_START, "", "(no demo result yet: run `python -m bench.demo`)", DEMO_END]
        )
    rec = json.loads(path.read_text())
    fig, m = rec["figures"], rec["machine"]
    flags = m.get("cpu_flags")
    units = (
        ""
        if flags is None
        else (", bf16 units" if {"avx512_bf16", "amx_bf16"} & set(flags) else ", no bf16 units")
    )
    cold = ", model cache cold" if fig.get("model_cache") == "cold" else ""
    where = (
        f"Output of `python -m bench.demo` ({_machine(m)}{units}{cold}, load average "
        f"{fig['load_average_1m_before']} before the run; {fig['seconds']:.0f} s in all)."
    )
    if "install_seconds" in fig:
        where += (
            f" The install before it (a fresh venv, pip's cache off) took "
            f"{fig['install_seconds']:.0f} s: command 1 in "
            f"{fig['install_seconds'] + fig['seconds']:.0f} s."
        )
    if "answer_stage_seconds_apart" in fig:
        where += (
            f" In the same run, the answer stages took {fig['answer_stage_seconds']:.0f} s in one "
            f"batched call against {fig['answer_stage_seconds_apart']:.0f} s method by method "
            f"(`--answers-apart`, {fig['seconds_answers_apart']:.0f} s in all)."
        )
    return "\n".join([DEMO_START, "", *fig["output"], "", where, DEMO_END])


def _replace_block(text: str, start: str, end: str, body: str) -> str:
    """`text` with the block from `start` to `end` replaced by `body`; ValueError without them."""
    if start not in text or end not in text:
        raise ValueError(f"README.md lacks the markers {start!r} and {end!r}")
    before, rest = text.split(start, 1)
    return before + body + rest.split(end, 1)[1]


def readme_with_headline(text: str, results: Path = RESULTS) -> str:
    """`text` (the README) with its headline and demo blocks rewritten from the results."""
    text = _replace_block(text, START, END, headline(results))
    return _replace_block(text, DEMO_START, DEMO_END, demo_excerpt(results))
