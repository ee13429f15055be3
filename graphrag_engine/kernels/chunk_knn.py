"""A KNN graph of text chunks and the PageRank that ranks them (KET-RAG's skeleton pick).

Each chunk links to its `k` chunks sharing the most distinct words (lexical neighbours) and to
its `k` nearest chunks by cosine (semantic neighbours); the two edge lists are joined into one
undirected graph without repeated edges or self-loops, and PageRank (uniform teleport, the
walk of networkx's `pagerank`) scores every chunk on it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.ppr import personalized_pagerank
from graphrag_engine.kernels.similarity import cosine_topk, l2_normalize

BLOCK = 512
"""Chunks whose (block x chunks) overlap counts are held at once."""
TIE_MARGIN = 8
"""Nearest rows looked at beyond k, so that ties at the cut go to the lower row."""


def overlap_neighbours(words: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) edges: each row of the binary (chunks x words) matrix to the `k` other rows
    that share the most words with it (zero shared included), the lower row first on ties."""
    n = words.shape[0]
    k = min(k, n - 1)
    if k < 1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    binary = words.astype(bool).astype(np.int32).tocsr()
    right = binary.T.tocsc()
    src, dst = [], []
    for lo in range(0, n, BLOCK):
        hi = min(lo + BLOCK, n)
        shared = (binary[lo:hi] @ right).toarray()
        shared[np.arange(hi - lo), np.arange(lo, hi)] = -1  # never itself
        best = np.argsort(-shared, axis=1, kind="stable")[:, :k]
        src.append(np.repeat(np.arange(lo, hi), k))
        dst.append(best.ravel())
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64)


def cosine_neighbours(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) edges: each row to its `k` nearest other rows by cosine (rounded to 1e-6,
    so equal texts tie whatever float rounding says; then the lower row first)."""
    n = len(vectors)
    k = min(k, n - 1)
    if k < 1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    unit = l2_normalize(np.asarray(vectors, dtype=np.float32))
    wide = min(k + 1 + TIE_MARGIN, n)
    scores, ids = cosine_topk(unit, unit, wide, normalized=True)
    src = np.repeat(np.arange(n), wide).reshape(n, wide)
    scores = np.where(ids == src, -np.inf, np.round(scores, 6))  # never itself
    order = np.lexsort((ids, -scores), axis=1)[:, :k]
    rows = np.arange(n)[:, None]
    return src[rows, order].ravel().astype(np.int64), ids[rows, order].ravel().astype(np.int64)


def knn_chunk_graph(words: sp.csr_matrix, vectors: np.ndarray, k: int) -> CSRGraph:
    """The undirected graph of both neighbour lists, each edge once, no self-loops."""
    n = words.shape[0]
    s1, d1 = overlap_neighbours(words, k)
    s2, d2 = cosine_neighbours(vectors, k)
    src, dst = np.concatenate([s1, s2]), np.concatenate([d1, d2])
    keep = src != dst
    pairs = np.unique(np.stack([np.minimum(src, dst), np.maximum(src, dst)])[:, keep], axis=1)
    return CSRGraph.from_edges(pairs[0], pairs[1], n_nodes=n, directed=False)


def pagerank(graph: CSRGraph, damping: float = 0.85, tol: float = 1e-10) -> np.ndarray:
    """Global PageRank of every node (uniform teleport; a dangling node teleports), float64."""
    n = graph.n_nodes
    if n == 0:
        return np.zeros(0)
    result = personalized_pagerank(
        graph, [np.arange(n)], damping, tol=tol, max_iter=1000, dtype="float64"
    )
    return result.to_dense()[:, 0]


def top_share(scores: np.ndarray, share: float) -> np.ndarray:
    """Rows of the int(share x n) best scores, ascending (the lower row first on ties)."""
    take = int(len(scores) * share)
    order = np.lexsort((np.arange(len(scores)), -scores))
    return np.sort(order[:take])
