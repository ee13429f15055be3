"""The report's plots are readable at any number of runs from 2 to 20: no tick label stands on
another, and no point's name covers another name or a tick label (the demo's report once
printed a log axis's tick labels on top of each other and piled method names on one point)."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest

DEMO_COSTS = {  # seconds and LLM tokens per question of the demo's 13 methods (README excerpt)
    "hipporag": (0.56, 523), "pankrag": (4.82, 2019), "naive": (0.50, 481), "bm25": (0.56, 493),
    "hyde": (1.90, 579), "clue": (1.11, 490), "graphrag_local": (0.57, 538),
    "lightrag": (2.55, 865), "linearrag": (0.53, 498), "regraphrag": (6.10, 1434),
    "lego": (0.69, 667), "rograg": (11.66, 2951), "graphrag_global": (9.72, 4904),
}  # fmt: skip


def _runs(n: int, seed: int) -> tuple[list[str], dict, dict]:
    """n runs: the demo's first, then more of the same kind; tied qualities and close costs,
    as the demo's three questions give (many runs at Recall@5 0.83 and about 0.5 s)."""
    rng = random.Random(seed)
    labels = list(DEMO_COSTS)[:n] + [f"method_{i:02d}" for i in range(max(0, n - 13))]
    table: dict = {"recall@2": {}, "recall@5": {}, "f1": {}}
    cost: dict = {}
    for label in labels:
        seconds, tokens = DEMO_COSTS.get(label, (rng.uniform(0.4, 12), rng.uniform(400, 5000)))
        cost[label] = {"seconds": seconds, "query_tokens": tokens}
        for metric in table:
            mean = rng.choice([0.67, 0.83, 0.83, 1.0, 0.0, 0.1])
            table[metric][label] = (mean, max(0.0, mean - 0.2), min(1.0, mean + 0.2), 3)
    return labels, table, cost


def _figures(monkeypatch, draw) -> list:
    """The figures `draw` makes, kept open (the plot functions close theirs after saving)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close("all")
    monkeypatch.setattr(plt, "close", lambda *a: None)
    draw()
    figures = [plt.figure(n) for n in plt.get_fignums()]
    monkeypatch.undo()
    return figures


def _overlaps(boxes: list[tuple[str, object]]) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes share area (a pixel's tolerance for touching edges)."""
    found = []
    for (a, ba), (b, bb) in itertools.combinations(boxes, 2):
        if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 1 and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 1:
            found.append((a, b))
    return found


@pytest.mark.parametrize("n", [2, 5, 13, 20])
def test_no_label_covers_another(tmp_path: Path, monkeypatch, n: int) -> None:
    from graphrag_engine.eval.plots import cost_quality_plot, metric_plots

    labels, table, cost = _runs(n, seed=n)
    metrics = list(table)
    figures = _figures(
        monkeypatch,
        lambda: (
            metric_plots(tmp_path, labels, metrics, table, [2, 5]),
            cost_quality_plot(tmp_path, labels, table, cost),
        ),
    )
    assert len(figures) == 4  # answers, retrieval, recall@k, cost against quality
    named = 0
    for fig in figures:
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            names = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]
            named += len(names)
            for axis in (ax.xaxis, ax.yaxis):
                ticks = [
                    (t.get_text(), t.get_window_extent(renderer))
                    for t in axis.get_ticklabels(which="both")
                    if t.get_visible() and t.get_text()
                ]
                if axis.get_scale() == "log":  # a cost axis: read off two values at least
                    assert len(ticks) >= 2, [t for t, _ in ticks]
                assert not _overlaps(ticks), _overlaps(ticks)
                assert not _overlaps(names + ticks), _overlaps(names + ticks)
            assert not _overlaps(names), _overlaps(names)
    # most points are named (four panels of n points); a name that fits nowhere is left out
    assert named >= math.ceil(0.5 * 4 * n), named
