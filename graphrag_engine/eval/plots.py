"""The evaluation report's plots: bars with bootstrap error bars per metric group, Recall@k
curves, and cost against quality per run. Each is a PNG beside report.md, which links it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

COST_AXES = (("seconds", "seconds per question"), ("query_tokens", "LLM tokens per question"))
"""The cost axes of the cost-vs-quality plot, in order of preference."""
QUALITY_AXES = ("recall@5", "f1", "hr@1", "recall@2", "exact_match", "accuracy")
"""The quality axes of the cost-vs-quality plot: the first two metrics every run has."""
DPI = 110
"""Dots per inch of every plot (the figure's own, so names are placed as they are drawn)."""
SHADED_RUNS = 4
"""Recall@k curves get their interval bands up to this many runs."""
MARKERS = "osD^v<>ph*"
LABEL_OFFSETS = [
    (dx, dy) for r in (4, 10, 18) for dx, dy in ((r, r), (r, -r - 6), (-r, r), (-r, -r - 6))
]
"""Where a point's name may stand, in points from it, nearest first (the name's corner nearest
the point is put there)."""
MARK_PX = 5
"""Half the side of the square around a drawn point that no name may cover, in pixels."""


def _style(i: int) -> dict[str, str]:
    """Colour and marker of the i-th run: 20 colours, and markers that vary with them."""
    import matplotlib  # colour maps only; the plots are written headless

    return {"color": matplotlib.colormaps["tab20"](i % 20), "marker": MARKERS[i % len(MARKERS)]}


def _pyplot():
    import matplotlib  # the plots only: the engine runs without a display

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def metric_plots(
    out: Path, labels: list[str], metrics: list[str], table: dict, ks: list[int]
) -> dict[str, list[str]]:
    """Bars with bootstrap error bars per metric group (only the runs that have the group's
    metrics), and Recall@k curves; returns each written group's runs."""
    plt = _pyplot()
    groups = {
        "answers": [m for m in metrics if m in ("exact_match", "f1", "accuracy", "hr@1")],
        "subgraph": [m for m in metrics if m.startswith("entity_")],
        "retrieval": [m for m in metrics if m.startswith(("recall@", "hit@"))],
        "ragas": [m for m in metrics if m.startswith(("faith", "context_"))],
    }
    plotted: dict[str, list[str]] = {}
    for name, ms in groups.items():
        runs = [lb for lb in labels if any(not math.isnan(table[m][lb][0]) for m in ms)]
        if not ms or not runs:
            continue  # a run without answers (retrieval only) has no bar among the answers
        fig, ax = plt.subplots(figsize=(min(12, max(5, 0.3 * len(ms) * len(runs) + 1.5)), 3.6))
        width = 0.8 / len(runs)
        for j, label in enumerate(runs):
            rows = [table[m][label] for m in ms]
            means = [0.0 if math.isnan(r[0]) else r[0] for r in rows]
            err = [
                [0.0 if math.isnan(r[0]) else max(0.0, r[0] - r[1]) for r in rows],
                [0.0 if math.isnan(r[0]) else max(0.0, r[2] - r[0]) for r in rows],
            ]
            xs = [i + (j - (len(runs) - 1) / 2) * width for i in range(len(ms))]  # centred
            ax.bar(xs, means, width, yerr=err, capsize=3, label=label)
        ax.set_xticks(range(len(ms)), ms, rotation=30, ha="right")
        ax.set_ylim(0, 1.08)  # room above 1.0 for the error bars' caps
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        ax.set_title(f"{name} (95% bootstrap CI)")
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=DPI)
        plt.close(fig)
        plotted[name] = runs
    rec = [f"recall@{k}" for k in sorted(ks) if f"recall@{k}" in table]
    if rec:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        xs = [int(m.split("@")[1]) for m in rec]
        for i, label in enumerate(labels):
            ys = [table[m][label][0] for m in rec]
            ax.plot(xs, ys, label=label, **_style(i))
            if len(labels) <= SHADED_RUNS:  # more bands than that hide the lines
                lo = [table[m][label][1] for m in rec]
                hi = [table[m][label][2] for m in rec]
                ax.fill_between(xs, lo, hi, alpha=0.15, color=_style(i)["color"])
        ax.set_xticks(xs)
        ax.set_xlabel("k")
        ax.set_ylabel("Recall@k")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        fig.savefig(out / "recall_at_k.png", dpi=DPI)
        plt.close(fig)
    return plotted


def cost_quality_plot(
    out: Path, labels: list[str], table: dict, cost: dict[str, dict[str, float]]
) -> str | None:
    """Each run's quality (Recall@5 and answer F1, for the runs that have them, with intervals)
    against its cost per question (seconds; LLM tokens too when a run used an LLM), log
    scale, one panel per pair; the file name, or None without a shared quality metric."""
    qualities = [
        m
        for m in QUALITY_AXES
        if m in table and any(not math.isnan(table[m][lb][0]) for lb in labels)
    ][:2]
    axes = [(k, name) for k, name in COST_AXES if any(cost[lb].get(k, 0) > 0 for lb in labels)]
    if not qualities or not axes or not labels:
        return None
    plt = _pyplot()
    fig, grid = plt.subplots(
        len(qualities),
        len(axes),
        figsize=(5.4 * len(axes), 3.6 * len(qualities)),
        squeeze=False,
        dpi=DPI,
    )
    named: list[tuple[Any, float, float, str]] = []  # (panel, x, y, run) of every point drawn
    for r, quality in enumerate(qualities):
        for c, (key, name) in enumerate(axes):
            ax = grid[r][c]
            for i, label in enumerate(labels):
                mean, lo, hi, _ = table[quality][label]
                if math.isnan(mean):
                    continue  # a run without this metric (e.g. no passages ranked)
                x = max(cost[label].get(key, 0.0), 1e-4)
                style = _style(i)
                ax.errorbar(
                    [x], [mean], yerr=[[mean - lo], [hi - mean]], capsize=3, linestyle="none",
                    marker=style["marker"], color=style["color"], label=label,
                )  # fmt: skip
                named.append((ax, x, mean, label))
            ax.set_xscale("log")
            log_ticks(ax, [max(cost[lb].get(key, 0.0), 1e-4) for lb in labels])
            ax.set_xlabel(name + " (log)")
            ax.set_ylabel(f"{quality} (95% CI)")
            ax.set_ylim(0, 1.05)
    grid[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.suptitle("quality against cost per question (up and to the left is better)")
    fig.tight_layout()
    for ax in {id(a): a for a, *_ in named}.values():
        name_points(ax, [(x, y, label) for a, x, y, label in named if a is ax])
    fig.savefig(out / "cost_quality.png", dpi=DPI)
    plt.close(fig)
    return "cost_quality.png"


def log_ticks(ax: Any, values: list[float]) -> None:
    """Major ticks of a log axis at 1-2-5 steps (up to three decades) or whole decades (more, one
    in every few when they are many), labelled as plain numbers; minor ticks unlabelled, so
    no two labels stand on each other."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    lo, hi = min(values), max(values)
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if last == first:
        last += 1
    decades = last - first
    subs = (1, 2, 5) if decades <= 3 else (1,)
    stride = max(1, math.ceil(decades / 5))
    ticks = [s * 10.0**d for d in range(first, last + 1, stride) for s in subs]
    ticks = [t for t in ticks if lo / 1.5 <= t <= hi * 1.5] or [10.0**first, 10.0**last]
    ax.set_xlim(min(lo, ticks[0]) / 1.3, max(hi, ticks[-1]) * 1.3)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(_plain_number)
    ax.xaxis.set_minor_formatter(NullFormatter())


def _plain_number(value: float, _pos: int | None = None) -> str:
    """A tick value as a person writes it: 0.002, 0.5, 20, 3k."""
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def name_points(ax: Any, points: list[tuple[float, float, str]]) -> None:
    """Write each point's name beside it, at the nearest place (LABEL_OFFSETS) where it covers
    no name already written, no drawn point and nothing outside the panel; a name that fits
    nowhere is left out (the legend names every run by colour and marker)."""
    renderer = ax.figure.canvas.get_renderer()
    panel = ax.get_window_extent(renderer)
    marks = []
    for x, y, _ in points:
        px, py = ax.transData.transform((x, y))
        marks.append((px - MARK_PX, py - MARK_PX, px + MARK_PX, py + MARK_PX))
    placed: list[tuple[float, float, float, float]] = []
    for x, y, label in points:
        for dx, dy in LABEL_OFFSETS:
            text = ax.annotate(
                label, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=7,
                ha="left" if dx > 0 else "right", va="bottom" if dy > 0 else "top",
            )  # fmt: skip
            box = text.get_window_extent(renderer)
            edges = (box.x0, box.y0, box.x1, box.y1)
            inside = panel.x0 <= box.x0 and box.x1 <= panel.x1 and panel.y0 <= box.y0
            if inside and box.y1 <= panel.y1 and not any(_meet(edges, o) for o in placed + marks):
                placed.append(edges)
                break
            text.remove()


def _meet(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether two boxes (x0, y0, x1, y1) share any area."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
