"""The README's headline results, written from bench/results/ by `python -m bench.tables`.

Two small tables: retrieval quality of the methods on MuSiQue dev over the LLM-free index (the
rows of the PankRAG and ROGRAG benches, which share one index and one question set), and
questions/s of every LLM-free method on a GPU against the same machine's CPU cores (the GPU
pipeline bench). Each says the command and machine it came from; commits and dates are on the
generated pages in docs/benchmarks/, not in the README. The README holds the text
between its two markers; `python -m bench.tables --check` fails when that text is stale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import REPO, RESULTS

README = REPO / "README.md"
START = "<!-- headline: written by `python -m bench.tables` from bench/results/; do not edit -->"
END = "<!-- /headline -->"
QUALITY = ("pankrag.json", "rograg.json")
"""Result files whose rows are methods on one question set and index."""
THROUGHPUT = "gpu_pipeline-cuda.json"


def _machine(m: dict[str, Any]) -> str:
    gpu = f", {m['gpu']}" if m.get("gpu") else ""
    return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores{gpu}"


def _quality(results: Path) -> list[str]:
    """Recall@2 and @5 with intervals, one row per distinct method, best R@5 first."""
    rows: dict[str, dict] = {}
    sources = []
    for name in QUALITY:
        path = results / name
        if not path.exists():
            continue
        rec = json.loads(path.read_text())
        sources.append(f"`{rec['command']}` ({_machine(rec['machine'])})")
        for row in rec["figures"].get("rows", []):
            label = row["method"].strip()
            if row.get("R@5") is not None and not label.startswith(("-", "gold plans,")):
                rows.setdefault(label, row)
    if not rows:
        return []
    first = next(iter(rows.values()))
    out = [
        f"Retrieval on MuSiQue dev, first {first['questions']} questions, over the LLM-free index "
        "(MiniLM vectors, spaCy entities, no LLM at indexing); mean Recall@k of the gold "
        "passages, 95% bootstrap interval:",
        "",
        "| method | Recall@2 | Recall@5 |",
        "| --- | --- | --- |",
    ]
    for label, r in sorted(rows.items(), key=lambda kv: -kv[1]["R@5"]):
        cells = [
            f"{r[k]:.3f} [{r[k + '_ci'][0]:.3f}, {r[k + '_ci'][1]:.3f}]" for k in ("R@2", "R@5")
        ]
        out.append(f"| {label} | {cells[0]} | {cells[1]} |")
    out += ["", "From " + "; ".join(sources) + "."]
    return out


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
    out += ["", f"From `{rec['command']}`."]
    return out


def headline(results: Path = RESULTS) -> str:
    """The text between the README's markers."""
    parts = [_quality(results), _throughput(results)]
    body = [line for part in parts if part for line in [*part, ""]]
    return "\n".join([START, "", *body, END])


def readme_with_headline(text: str, results: Path = RESULTS) -> str:
    """`text` (the README) with its headline block rewritten; ValueError without markers."""
    if START not in text or END not in text:
        raise ValueError(f"README.md lacks the headline markers {START!r} and {END!r}")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    return before + headline(results) + after
