"""Stepwise selection of a retrieval set (ROGRAG, Algorithm 1): grow and prune a set of
candidate vectors so that the set as a whole sits as close to the query as it can.

The distance of a set S to the query q is 1 - cos(sum of S's unit vectors, q), the cosine of
the set's centroid. Each round adds the candidate whose addition gives the smallest distance
and then removes the member whose removal gives the smallest distance, each only when it
improves on the distance before it; the loop stops when a round changes nothing (or after
`max_rounds`). Every candidate's distance in a round comes from one matrix-vector product.
"""

from __future__ import annotations

import numpy as np


def stepwise_select(
    vectors: np.ndarray, query: np.ndarray, max_size: int, max_rounds: int = 64
) -> list[int]:
    """Rows of `vectors` (unit rows) chosen by add / remove rounds, in the order they joined;
    ties go to the lower row."""
    n = len(vectors)
    v = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    chosen: list[int] = []
    inside = np.zeros(n, dtype=bool)
    total = np.zeros(v.shape[1] if v.ndim == 2 else 0)
    best = 1.0
    for _ in range(max_rounds):
        changed = False
        if len(chosen) < max_size and not inside.all():
            grown = total[None, :] + v  # every candidate added to the set
            dist = 1.0 - (grown @ q) / np.maximum(np.linalg.norm(grown, axis=1), 1e-12)
            dist[inside] = np.inf
            e = int(np.argmin(dist))
            if dist[e] < best - 1e-12:
                chosen.append(e)
                inside[e] = True
                total = total + v[e]
                best = float(dist[e])
                changed = True
        if len(chosen) > 1:
            members = np.asarray(chosen)
            shrunk = total[None, :] - v[members]  # every member taken out
            dist = 1.0 - (shrunk @ q) / np.maximum(np.linalg.norm(shrunk, axis=1), 1e-12)
            i = int(np.argmin(dist))
            if dist[i] < best - 1e-12:
                e = chosen.pop(i)
                inside[e] = False
                total = total - v[e]
                best = float(dist[i])
                changed = True
        if not changed:
            break
    return chosen
