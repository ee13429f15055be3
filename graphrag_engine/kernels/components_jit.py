"""Connected components of a small undirected graph given as an edge list (numba): for graphs of
a few hundred edges, built and labelled once per question, where building a scipy sparse
matrix costs more than the search itself."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def edge_components(n: int, rows: np.ndarray, cols: np.ndarray) -> tuple[int, np.ndarray]:
    """The components of nodes 0..n-1 joined by edges (rows[i], cols[i]): their count and each
    node's label, components numbered in the order of their smallest node, as scipy's
    `connected_components(directed=False)` numbers them. Union-find whose root is always its
    set's smallest node."""
    parent = np.arange(n)
    for i in range(rows.size):
        a, b = rows[i], cols[i]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    labels = np.empty(n, dtype=np.int32)
    count = 0
    for v in range(n):
        root = v
        while parent[root] != root:
            root = parent[root]
        if root == v:
            labels[v] = count
            count += 1
        else:  # the root is smaller than v, so it is labelled already
            labels[v] = labels[root]
    return count, labels
