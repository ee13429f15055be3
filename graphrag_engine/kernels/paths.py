"""Shortest paths on a CSRGraph: multi-source Dijkstra / BFS, all shortest paths within a hop
limit (between two nodes, or from one node to every node it reaches), bounded simple paths,
and the closest pair between two node sets.

Shortest paths between (source, target) requests, distances and the closest pair run in
scipy's compiled csgraph routines, once per distinct source for the whole batch of requests.
The hop-limited enumerations (all shortest paths, simple paths, every shortest path from one
node) walk the CSR arrays level by level, one source at a time: their output is a list of
paths, bounded by a hop limit and a path cap. Every shortest path from one node grows a whole
level's paths in a few array operations; the others walk paths in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.segments import csr_gather


@dataclass(frozen=True)
class Path:
    """A path as its node sequence and its length (sum of weights, or hops when unweighted)."""

    nodes: tuple[int, ...]
    length: float

    @property
    def hops(self) -> int:
        """Number of edges on the path."""
        return len(self.nodes) - 1


def csgraph_matrix(graph: CSRGraph, weighted: bool):
    """The graph as the scipy matrix csgraph's searches take (zero weights kept as tiny ones)."""
    m = graph.to_scipy()
    if not weighted:
        return m
    if graph.weights.size and graph.weights.min() <= 0:
        # csgraph treats explicit zeros as missing edges; keep them as tiny positive weights
        m = m.copy()
        m.data = np.where(m.data > 0, m.data, np.finfo(float).tiny)
    return m


def walk_back(pred_row: np.ndarray, source: int, target: int) -> tuple[int, ...]:
    """The path source -> target read back from a csgraph predecessor row."""
    nodes = [target]
    while nodes[-1] != source:
        nodes.append(int(pred_row[nodes[-1]]))
    return tuple(reversed(nodes))


def shortest_paths(
    graph: CSRGraph,
    pairs: Sequence[tuple[int, int]],
    weighted: bool = True,
) -> list[Path | None]:
    """One shortest path per (source, target) pair (None when unreachable).

    Dijkstra (weighted) or BFS (unweighted) runs once per distinct source for all its targets.
    """
    if not pairs:
        return []
    sources = np.unique(np.fromiter((s for s, _ in pairs), dtype=np.int64))
    dist, pred = csgraph.dijkstra(
        csgraph_matrix(graph, weighted),
        directed=True,
        indices=sources,
        unweighted=not weighted,
        return_predecessors=True,
    )
    row_of = {int(s): i for i, s in enumerate(sources)}
    out: list[Path | None] = []
    for s, t in pairs:
        row = row_of[int(s)]
        d = dist[row, t]
        out.append(None if np.isinf(d) else Path(walk_back(pred[row], int(s), int(t)), float(d)))
    return out


def distances(graph: CSRGraph, sources: Sequence[int], weighted: bool = True) -> np.ndarray:
    """(len(sources), n) matrix of shortest-path lengths (inf when unreachable)."""
    return csgraph.dijkstra(
        csgraph_matrix(graph, weighted),
        directed=True,
        indices=np.asarray(sources),
        unweighted=not weighted,
    )


def shortest_paths_from(
    graph: CSRGraph | sparse.csr_array,
    source: int,
    max_hops: int | None = None,
    cap: int | None = None,
    within: np.ndarray | None = None,
) -> list[tuple[int, ...]]:
    """Every minimum-hop path from `source` to each node it reaches (the source itself left
    out), within `max_hops` edges when given: igraph's `get_all_shortest_paths(source)` with
    paths as node sequences (parallel edges give one path); at most `cap` paths, the shortest
    first, ordered by (length, nodes). `shortest_path_levels` gives them as arrays."""
    levels = shortest_path_levels(graph, source, max_hops, cap, within)
    return [tuple(p) for level in levels for p in level.tolist()]


def shortest_path_levels(
    graph: CSRGraph | sparse.csr_array,
    source: int,
    max_hops: int | None = None,
    cap: int | None = None,
    within: np.ndarray | None = None,
) -> list[np.ndarray]:
    """`shortest_paths_from`'s paths as one array per length (a path a row, rows in node
    order). Level by level over arrays, every path of a level grows by each neighbour of its
    last node not reached before. Only the graph's structure is read: a scipy CSR array of it
    serves as well. `within` (a boolean array over the nodes) walks the subgraph induced by its
    True nodes, reading only the edges the walk reaches."""
    n_nodes = graph.indptr.size - 1
    limit = max_hops if max_hops is not None else n_nodes
    room = cap if cap is not None else np.iinfo(np.int64).max
    indptr = graph.indptr.astype(np.int64, copy=False)
    reached = np.zeros(n_nodes, dtype=bool)  # one flag a node: a level reads it per edge
    reached[source] = True
    paths = np.asarray([[source]], dtype=np.int64)  # a level's paths, one per row, in order
    out: list[np.ndarray] = []
    for _ in range(limit):
        if room <= 0:
            break
        owner, slots = csr_gather(indptr, paths[:, -1])
        step = graph.indices[slots].astype(np.int64)
        fresh = ~reached[step] if within is None else within[step] & ~reached[step]
        # one path per (path, next node), in (path, node) order: the new level stays sorted
        key = np.unique(owner[fresh] * n_nodes + step[fresh])
        if not key.size:
            break
        owner, step = np.divmod(key, n_nodes)
        paths = np.column_stack([paths[owner], step])
        out.append(paths[:room])
        room -= len(out[-1])
        reached[step] = True
    return out
