"""0-1 knapsack for Clue-RAG's core-chunk selection: maximise total value under a token budget.

Exact dynamic programming over integer weights when items x (capacity + 1) cells fit in
`max_cells` (one byte each for the keep table). Beyond that, weights are scaled down by
f = ceil(capacity / cells_per_item) and rounded up, so every selection stays feasible for the
true capacity; the result is the better of that scaled DP and the density-greedy solution
(with the best single item), so it is at least half the optimum and usually within the value
lost to rounding: items whose weight rounds up lose at most f - 1 units of capacity each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class KnapsackResult:
    """Chosen item indices (ascending), their total value and weight, and whether it is exact."""

    items: np.ndarray
    value: float
    weight: int
    exact: bool


def _dp(values: np.ndarray, weights: np.ndarray, capacity: int) -> np.ndarray:
    """Exact DP; returns the chosen indices. Row-vectorized over capacities."""
    n = values.size
    best = np.zeros(capacity + 1)
    keep = np.zeros((n, capacity + 1), dtype=bool)
    for i in range(n):
        w = int(weights[i])
        if w > capacity:
            continue
        cand = best[: capacity + 1 - w] + values[i]
        take = cand > best[w:]
        keep[i, w:] = take
        best[w:] = np.where(take, cand, best[w:])
    chosen = []
    c = capacity
    for i in range(n - 1, -1, -1):
        if keep[i, c]:
            chosen.append(i)
            c -= int(weights[i])
    return np.array(sorted(chosen), dtype=np.int64)


def _greedy(values: np.ndarray, weights: np.ndarray, capacity: int) -> np.ndarray:
    """Density greedy, compared with the best single item (a 1/2-approximation)."""
    with np.errstate(divide="ignore"):
        density = np.where(weights > 0, values / np.maximum(weights, 1e-300), np.inf)
    order = np.argsort(-density, kind="stable")
    # after the first item that does not fit, later (lighter) items may still fit: one pass
    chosen, used = [], 0
    for i in order:
        if used + weights[i] <= capacity:
            chosen.append(i)
            used += int(weights[i])
    chosen_arr = np.array(sorted(chosen), dtype=np.int64)
    single = np.flatnonzero(weights <= capacity)
    if single.size:
        top = single[np.argmax(values[single])]
        if values[top] > values[chosen_arr].sum():
            return np.array([top], dtype=np.int64)
    return chosen_arr


def knapsack(
    values: np.ndarray, weights: np.ndarray, capacity: int, max_cells: int = 200_000_000
) -> KnapsackResult:
    """Choose items maximising total value with total weight <= capacity."""
    values = np.asarray(values, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.int64)
    if values.shape != weights.shape or values.ndim != 1:
        raise ValueError("values and weights must be 1-D arrays of the same length")
    if weights.size and weights.min() < 0:
        raise ValueError("weights must be non-negative integers")
    if capacity < 0:
        raise ValueError("capacity must be non-negative")
    if values.size and np.any(values < 0):
        raise ValueError("values must be non-negative")
    n = values.size
    if n == 0:
        return KnapsackResult(np.empty(0, np.int64), 0.0, 0, True)
    if n * (capacity + 1) <= max_cells:
        items = _dp(values, weights, capacity)
        exact = True
    else:
        cells_per_item = max(max_cells // n - 1, 1)
        factor = -(-capacity // cells_per_item)
        scaled_w = -(-weights // factor)  # ceil: a scaled-feasible set is truly feasible
        items = _dp(values, scaled_w, capacity // factor)
        greedy = _greedy(values, weights, capacity)
        if values[greedy].sum() > values[items].sum():
            items = greedy
        exact = False
    return KnapsackResult(items, float(values[items].sum()), int(weights[items].sum()), exact)
