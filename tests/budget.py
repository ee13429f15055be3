"""The test tiers' time budgets, reported at the end of every run: each tier's wall seconds against
its budget (the run's wall clock when one tier ran; its tests' seconds summed when several
did), and its slowest files with their seconds (setup, call and teardown summed over the
workers, so a session fixture's cost lands on the first file that asked for it). CI's output
carries the report; a run past its budget says so in a line that starts with "OVER BUDGET"."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

BUDGET_S = {"unit": 180.0, "integration": 1200.0}
"""Seconds each tier may take on the project's 2-core machine: the unit tier (the inner loop)
3 minutes, the integration and gpu tiers together 20 minutes."""
SLOWEST = 12
"""How many of a tier's slowest files the report lists."""


def tier_of(nodeid: str) -> str:
    """The tier a test belongs to: unit, or integration (tests/integration and tests/gpu)."""
    return "unit" if nodeid.startswith("tests/unit/") else "integration"


def seconds_by_file(reports: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Seconds per test file from (node id, seconds) of each setup, call and teardown."""
    out: dict[str, float] = defaultdict(float)
    for nodeid, seconds in reports:
        out[nodeid.split("::", 1)[0]] += seconds
    return dict(out)


def report_lines(
    by_file: dict[str, float], wall_s: float | None = None, budgets: dict[str, float] = BUDGET_S
) -> list[str]:
    """The budget report: per tier that ran, its seconds against its budget and its slowest
    files, slowest first. `wall_s` is the run's wall clock, the tier's time when it ran alone."""
    tiers = {tier_of(f) for f in by_file}
    lines: list[str] = []
    for tier, budget in budgets.items():
        files = {f: s for f, s in by_file.items() if tier_of(f) == tier}
        if not files:
            continue
        summed = sum(files.values())
        if wall_s is not None and len(tiers) == 1:
            spent = wall_s
            head = f"{tier} tier: {wall_s:,.0f} s wall ({summed:,.0f} s of tests)"
        else:
            spent = summed
            head = f"{tier} tier: {summed:,.0f} s of tests"
        head += f" against its budget of {budget:,.0f} s"
        lines.append(head if spent <= budget else f"OVER BUDGET: {head}")
        ranked = sorted(files.items(), key=lambda kv: -kv[1])[:SLOWEST]
        lines += [f"  {s:8.1f} s  {f}" for f, s in ranked]
    return lines
