"""The compiled edge-list components against scipy's and networkx's."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from graphrag_engine.kernels.components_jit import edge_components


@pytest.mark.parametrize("seed", range(20))
def test_labels_equal_scipys_and_sets_equal_networkxs(seed: int) -> None:
    """Random graphs of 1-300 nodes with self-loops, repeated and isolated nodes: scipy's count
    and labels exactly (numbered by each component's smallest node), networkx's node sets."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    m = int(rng.integers(0, 2 * n))
    rows, cols = rng.integers(0, n, m), rng.integers(0, n, m)
    count, labels = edge_components(n, rows, cols)
    want_count, want = connected_components(
        coo_matrix((np.ones(m), (rows, cols)), shape=(n, n)), directed=False
    )
    assert count == want_count
    np.testing.assert_array_equal(labels, want)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(rows.tolist(), cols.tolist(), strict=True))
    got = sorted(sorted(np.flatnonzero(labels == c).tolist()) for c in range(count))
    assert got == sorted(sorted(c) for c in nx.connected_components(g))


def test_no_edges_and_a_chain() -> None:
    """Every node its own component without edges; one component along a chain given backwards."""
    count, labels = edge_components(4, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert count == 4 and labels.tolist() == [0, 1, 2, 3]
    count, labels = edge_components(4, np.array([3, 2, 1]), np.array([2, 1, 0]))
    assert count == 1 and labels.tolist() == [0, 0, 0, 0]
