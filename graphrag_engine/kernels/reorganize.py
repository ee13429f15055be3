"""ReGraphRAG's graph reorganization (Algorithm 1): join retrieved node groups into one.

Step 1 connects every pair of groups that the graph already links: the shortest path between
any node of one and any node of the other (one multi-source Dijkstra, or BFS, per group
against all later groups), candidates taken in ascending path length and merged with
union-find, each merge adding the path's intermediate nodes and edges. Step 2 joins what is
still apart by similarity: the cross-component cosine of node vectors, then repeatedly the most
similar pair of components is bridged by a new edge between its most similar node pair (the
component-level matrix updated by row maxima), until one component remains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csgraph

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.paths import csgraph_matrix, walk_back


@dataclass
class Reorganization:
    """What Algorithm 1 made of one list of node groups."""

    nodes: np.ndarray
    """Every node of the result, ascending: the groups' nodes plus step 1's path nodes."""
    path_edges: list[tuple[int, int]] = field(default_factory=list)
    """Existing graph edges that step 1's paths added (u < v, each once)."""
    bridges: list[tuple[int, int, float]] = field(default_factory=list)
    """Step 2's new edges (u, v, cosine), in the order they were made."""
    merges: list[tuple[int, int, float]] = field(default_factory=list)
    """Step 1's merges (group i, group j, path length), in the order they were made."""
    groups: int = 0
    components_after_paths: int = 0
    path_nodes_added: int = 0


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[max(ra, rb)] = min(ra, rb)
        return True


def candidate_paths(
    graph: CSRGraph, groups: Sequence[np.ndarray], weighted: bool = True
) -> list[tuple[float, int, int, tuple[int, ...]]]:
    """(length, i, j, path) for every pair i < j of groups the graph links, ascending by
    (length, i, j): the path is a shortest one from any node of group i to any node of group j."""
    matrix = csgraph_matrix(graph, weighted)
    found = []
    for i in range(len(groups) - 1):
        if groups[i].size == 0:
            continue
        dist, pred, nearest = csgraph.dijkstra(
            matrix,
            directed=True,
            indices=groups[i],
            unweighted=not weighted,
            return_predecessors=True,
            min_only=True,
        )
        for j in range(i + 1, len(groups)):
            if groups[j].size == 0:
                continue
            d = dist[groups[j]]
            best = int(np.argmin(d))
            if np.isfinite(d[best]):
                target = int(groups[j][best])
                path = walk_back(pred, int(nearest[target]), target)
                found.append((float(d[best]), i, j, path))
    found.sort(key=lambda c: (c[0], c[1], c[2]))
    return found


def reorganize(
    graph: CSRGraph,
    groups: Sequence[Sequence[int]],
    vectors: np.ndarray,
    weighted: bool = True,
    connect_by_paths: bool = True,
    bridge_by_similarity: bool = True,
) -> Reorganization:
    """Algorithm 1 over `groups` (node-id lists; duplicates allowed) of `graph`.

    `vectors` holds one L2-normalized row per graph node (step 2's cosine). The two switches
    turn a step off for ablations; with both on, the groups end as one component."""
    arrays = [np.unique(np.asarray(g, dtype=np.int64)) for g in groups]
    k = len(arrays)
    uf = _UnionFind(k)
    members: list[set[int]] = [set(a.tolist()) for a in arrays]
    out = Reorganization(nodes=np.zeros(0, np.int64), groups=k)
    edges: set[tuple[int, int]] = set()
    if connect_by_paths:
        for length, i, j, path in candidate_paths(graph, arrays, weighted):
            ri, rj = uf.find(i), uf.find(j)
            if ri == rj:
                continue
            uf.union(ri, rj)
            root, other = min(ri, rj), max(ri, rj)
            members[root] |= members[other] | set(path)
            members[other] = set()
            for u, v in zip(path, path[1:], strict=False):
                edges.add((min(u, v), max(u, v)))
            out.merges.append((i, j, length))
    roots = sorted({uf.find(i) for i in range(k) if members[uf.find(i)]})
    out.components_after_paths = len(roots)
    if bridge_by_similarity and len(roots) > 1:
        out.bridges = _bridge(vectors, [np.fromiter(sorted(members[r]), np.int64) for r in roots])
    every = set().union(*members) if members else set()
    original = set().union(*(set(a.tolist()) for a in arrays)) if arrays else set()
    out.nodes = np.fromiter(sorted(every), np.int64, len(every))
    out.path_edges = sorted(edges)
    out.path_nodes_added = len(every - original)
    return out


def _bridge(vectors: np.ndarray, components: list[np.ndarray]) -> list[tuple[int, int, float]]:
    """Step 2: join components by their most similar node pairs, most similar first."""
    c = len(components)
    owner = np.concatenate([np.full(len(m), i) for i, m in enumerate(components)])
    nodes = np.concatenate(components)
    sim = vectors[nodes] @ vectors[nodes].T
    best = np.full((c, c), -np.inf)
    pair = np.zeros((c, c, 2), np.int64)
    for a in range(c):
        rows = np.flatnonzero(owner == a)
        for b in range(a + 1, c):
            cols = np.flatnonzero(owner == b)
            block = sim[np.ix_(rows, cols)]
            r, q = np.unravel_index(int(np.argmax(block)), block.shape)
            best[a, b] = best[b, a] = block[r, q]
            pair[a, b] = pair[b, a] = (nodes[rows[r]], nodes[cols[q]])
    alive = list(range(c))
    bridges = []
    while len(alive) > 1:
        sub = best[np.ix_(alive, alive)]
        np.fill_diagonal(sub, -np.inf)
        x, y = np.unravel_index(int(np.argmax(sub)), sub.shape)
        a, b = sorted((alive[x], alive[y]))
        u, v = pair[a, b]
        bridges.append((int(u), int(v), float(best[a, b])))
        stronger = best[b] > best[a]
        best[a, stronger] = best[stronger, a] = best[b, stronger]
        pair[a, stronger] = pair[b, stronger]
        pair[stronger, a] = pair[stronger, b]
        alive.remove(b)
    return bridges
