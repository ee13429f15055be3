"""The report's cost tables: each run's LLM tokens and seconds per question, and the judge's
usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def run_cost(summary: dict[str, Any], questions: int) -> dict[str, float]:
    """A run's seconds and LLM tokens per question (0 when it asked no LLM)."""
    return {
        "seconds": float(summary.get("seconds") or 0.0) / max(1, questions),
        "query_tokens": float(sum(summary.get("query_tokens_per_question", {}).values())),
    }


def cost_table(
    runs: list[tuple[str, dict[str, Any], int]], cost: dict[str, dict[str, float]]
) -> list[str]:
    """The cost of each (label, summary, questions scored) run beside its quality: seconds,
    questions/s and tokens per question."""
    lines = [
        "## cost",
        "",
        "| run | questions | seconds / question | questions/s | LLM tokens / question "
        "| index tokens | gold passages in index |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, summary, questions in runs:
        gold = summary.get("gold_in_index")
        lines.append(
            f"| {label} | {questions} | {cost[label]['seconds']:.3g} | "
            f"{summary.get('questions_per_s', '–')} | {cost[label]['query_tokens']:.0f} | "
            f"{summary.get('index_tokens', '–')} | {'–' if gold is None else f'{gold:.0%}'} |"
        )
    return lines


def judge_usage(out: Path, usage: dict[str, dict[str, Any]]) -> list[str]:
    """The judge's prompts and tokens per stage: `judge_usage.json` and a report.md table."""
    (out / "judge_usage.json").write_text(json.dumps(usage, indent=2) + "\n")
    lines = [
        "## judge LLM usage",
        "",
        "| stage | prompts sent | prompt tokens | completion tokens | cached answers |",
        "|---|---|---|---|---|",
    ]
    for key, u in usage.items():
        lines.append(
            f"| {key} | {u['calls']} | {u['prompt_tokens']} | {u['completion_tokens']} | "
            f"{u['cached_calls']} |"
        )
    return lines
