"""Personalized PageRank and random walk with restart for a batch of queries.

Semantics follow igraph's `personalized_pagerank` (and networkx's `pagerank` with a
personalization vector): the walk follows an out-edge with probability `damping`, chosen in
proportion to its weight, and otherwise restarts from the query's seed distribution; a walk
that reaches a node without out-weight (dangling) restarts from the seeds as well.

Two modes:

* exact — one sparse x dense product per step for the whole batch (torch; the same code on
  CPU and CUDA): power iteration (stops when each column's L1 change is below `tol`; its L1
  error is then below tol * damping / (1 - damping)) or batched BiCGSTAB on the linear
  system (stops when each column's L1 error is below `tol`; fewer products at high damping).
  dtype "mixed" (default) runs the sparse products in float32 and sums scores in float64
  (faster; float32 rounding puts a floor under its error, so the L1 bound above is float64's,
  bench/kernels.py measures both); "float64" for full precision.
  With `topk` set, only each query's k best nodes come back (picked where the scores were
  computed: on a GPU the dense (n, B) block never crosses to the host).
* local — forward push (Andersen, Chung & Lang 2006), a compiled queue loop per query
  (numba, graphrag_engine/kernels/push_jit.py) that stops when every residual is below `eps * out_degree`
  (its bar is lowered to that in phases); the residual r left at the end is absorbed as
  (1 - damping) * r(u) into node u. It returns p with p <= p_exact entrywise and the exact L1
  gap ||p_exact - p||_1 = damping * sum(r) (reported per query as `error_bound`), so every
  node's absolute error is at most that bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from graphrag_engine.kernels.graph import CSRGraph, torch_csr
from graphrag_engine.kernels.ppr_solvers import bicgstab, power_iteration
from graphrag_engine.kernels.segments import dense_topk, segment_rank, segment_topk

SeedSpec = Mapping[int, float] | Sequence[int] | np.ndarray | tuple[np.ndarray, np.ndarray]
"""One query's seeds: {node: weight}, node ids (equal weights), or (node ids, weights) arrays
(a seed set over a whole part of the graph, without a Python dict of it)."""


def normalize_seeds(
    seeds: Sequence[SeedSpec], n_nodes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flatten a batch of seed sets into (query, node, weight) arrays; weights sum to 1 per query."""
    qs, ns, ws = [], [], []
    for q, spec in enumerate(seeds):
        if isinstance(spec, Mapping):
            nodes = np.fromiter(spec.keys(), dtype=np.int64, count=len(spec))
            weights = np.fromiter(spec.values(), dtype=np.float64, count=len(spec))
        elif isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], np.ndarray):
            nodes = np.asarray(spec[0], dtype=np.int64).ravel()
            weights = np.asarray(spec[1], dtype=np.float64).ravel()
            if nodes.size != weights.size:
                raise ValueError(f"query {q}: {nodes.size} seed nodes but {weights.size} weights")
        else:
            nodes = np.asarray(spec, dtype=np.int64).ravel()
            weights = np.ones(nodes.size)
        if nodes.size == 0:
            raise ValueError(f"query {q} has no seed nodes")
        if nodes.min() < 0 or nodes.max() >= n_nodes:
            raise ValueError(f"query {q} has a seed outside [0, {n_nodes})")
        if weights.min() < 0 or weights.sum() <= 0:
            raise ValueError(f"query {q} needs non-negative seed weights with a positive sum")
        qs.append(np.full(nodes.size, q, dtype=np.int64))
        ns.append(nodes)
        ws.append(weights / weights.sum())
    if not qs:  # an empty batch: every mode returns a result of zero queries
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(qs), np.concatenate(ns), np.concatenate(ws)


@dataclass
class PPRResult:
    """Scores of a batch: dense (n, B) for exact mode, sparse per-query entries for local mode."""

    n_nodes: int
    n_queries: int
    dense: np.ndarray | None = None
    query: np.ndarray | None = None  # local mode: query of each stored entry
    node: np.ndarray | None = None
    score: np.ndarray | None = None
    error_bound: np.ndarray | None = None  # local mode: L1 gap to the exact vector, per query
    # exact: power steps of the slowest block; local: the most pushes any query took
    iterations: int = 0

    def to_dense(self) -> np.ndarray:
        """(n_nodes, n_queries) score matrix."""
        if self.dense is not None:
            return self.dense
        out = np.zeros((self.n_nodes, self.n_queries))
        out[self.node, self.query] = self.score
        return out

    def topk(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(B, k) node ids and scores, best first; rows padded with -1 / 0 when fewer nodes scored."""
        if self.dense is not None:
            nodes, scores = dense_topk(self.dense.T, k)
            return nodes, scores.astype(np.float64)
        nodes = np.full((self.n_queries, k), -1, dtype=np.int64)
        scores = np.zeros((self.n_queries, k))
        order, rank = segment_rank(self.query, self.score, self.n_queries)
        keep = rank < k
        q = self.query[order][keep]
        nodes[q, rank[keep]] = self.node[order][keep]
        scores[q, rank[keep]] = self.score[order][keep]
        return nodes, scores


def personalized_pagerank(
    graph: CSRGraph,
    seeds: Sequence[SeedSpec],
    damping: float = 0.85,
    *,
    mode: str = "exact",
    solver: str = "auto",
    tol: float = 1e-6,
    max_iter: int = 200,
    eps: float = 1e-7,
    batch_size: int | None = None,
    device: str = "cpu",
    dtype: str = "mixed",
    topk: int | None = None,
    within: tuple[int, int] | None = None,
) -> PPRResult:
    """PPR of every seed set in `seeds` (one query each) in one batched computation.

    exact mode returns dense (n, B) scores, or with `topk` only each query's k best nodes of
    positive score as sparse entries (ties at the cut go to the lowest ids, as `topk()` does);
    local mode returns the pushed entries (with `topk`, each query's k best). `within`
    = (lo, hi) keeps only nodes in [lo, hi) (one part of a multi-partite graph, e.g. its
    passages); it needs `topk`, so that a query's result is bounded by k, not by the graph.
    """
    if not 0.0 < damping < 1.0:
        raise ValueError(f"damping must lie in (0, 1), got {damping}")
    if topk is not None and topk < 1:
        raise ValueError(f"topk must be a positive number of nodes, got {topk}")
    if within is not None and (topk is None or not 0 <= within[0] <= within[1] <= graph.n_nodes):
        raise ValueError(f"within needs topk and a node range inside the graph, got {within}")
    if batch_size is None:
        batch_size = CPU_BLOCK if device == "cpu" else GPU_BLOCK
    if mode == "exact":
        return _exact(
            graph, seeds, damping, tol, max_iter, batch_size, device, dtype, solver, topk, within
        )
    if mode == "local":
        return _local(graph, seeds, damping, eps, topk, within)
    raise ValueError(f"mode must be 'exact' or 'local', got {mode!r}")


CPU_BLOCK = 16
"""Queries per exact block on the CPU: a block of 16 columns keeps each gathered row in two
cache lines (bench/kernels.py --exact-batch compares block sizes)."""
GPU_BLOCK = 1024
"""Queries per exact block on a GPU, where wide products fill the device."""


def random_walk_with_restart(
    graph: CSRGraph, seeds: Sequence[SeedSpec], restart_prob: float = 0.15, **kwargs
) -> PPRResult:
    """RWR with restart probability c: the stationary walk of PPR with damping 1 - c."""
    return personalized_pagerank(graph, seeds, damping=1.0 - restart_prob, **kwargs)


# -- exact: batched power iteration ----------------------------------------------------------
def _transition_T(graph: CSRGraph, device: str, dtype):
    """P^T as a torch sparse CSR tensor: row v holds the step probabilities of edges u -> v."""
    key = ("transition_T", device, dtype)
    if key not in graph._cache:
        pt = graph.transition_T()
        idx = pt.indices.dtype
        graph._cache[key] = torch_csr(
            pt.indptr.astype(idx), pt.indices, pt.data, graph.n_nodes, device, dtype
        )
    return graph._cache[key]


def _exact(
    graph, seeds, damping, tol, max_iter, batch_size, device, dtype_name, solver, topk, within
) -> PPRResult:
    import torch

    if dtype_name not in ("float64", "float32", "mixed"):
        raise ValueError(f"dtype must be 'float64', 'float32' or 'mixed', got {dtype_name!r}")
    # mixed: the sparse products run in float32, the scores accumulate in float64
    work = torch.float64 if dtype_name == "float64" else torch.float32
    acc = torch.float32 if dtype_name == "float32" else torch.float64
    if solver == "auto":
        solver = "power"  # measured faster than BiCGSTAB here at 0.5 and 0.85 (bench/kernels.py)
    if solver not in ("power", "bicgstab"):
        raise ValueError(f"solver must be 'auto', 'power' or 'bicgstab', got {solver!r}")
    n, b = graph.n_nodes, len(seeds)
    q, nodes, weights = normalize_seeds(seeds, n)
    pt = _transition_T(graph, device, work)
    dangling = torch.from_numpy(graph.dangling).to(device=device, dtype=work)
    out_dtype = np.float32 if dtype_name == "float32" else np.float64
    out = np.empty((n, b), dtype=out_dtype) if topk is None else None
    parts: list[tuple[np.ndarray, ...]] = []
    iters = 0
    for lo in range(0, b, batch_size):
        hi = min(lo + batch_size, b)
        sel = (q >= lo) & (q < hi)
        s = torch.zeros((n, hi - lo), dtype=acc, device=device)
        s.index_put_(
            (torch.from_numpy(nodes[sel]).to(device), torch.from_numpy(q[sel] - lo).to(device)),
            torch.from_numpy(weights[sel]).to(device=device, dtype=acc),
            accumulate=True,
        )
        if solver == "power":
            x, steps = power_iteration(pt, dangling, s, damping, tol, max_iter)
        else:
            x, steps = bicgstab(pt, s.to(work), damping, tol, max_iter)
        iters = max(iters, steps)
        if topk is None:
            torch.from_numpy(out)[:, lo:hi].copy_(x)  # one copy, straight into the result
        else:
            first = 0 if within is None else within[0]
            part = x if within is None else x[within[0] : within[1]]
            node, col, score = _best_entries(part, topk)
            parts.append((col + lo, node + first, score.astype(out_dtype)))
    if topk is None:
        return PPRResult(n, b, dense=out, iterations=iters)
    query, node, score = (
        (np.concatenate(a) for a in zip(*parts, strict=True))
        if parts
        else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, out_dtype))
    )
    return PPRResult(n, b, query=query, node=node, score=score, iterations=iters)


def _best_entries(x, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(node, column, score) of each column's k best positive entries of x, best first, ties by
    ascending node: only the entries at or above each column's k-th value leave the device."""
    import torch

    if x.shape[0] == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0)
    kth = torch.topk(x, min(k, x.shape[0]), dim=0).values[-1]
    node, col = torch.nonzero((x >= kth) & (x > 0), as_tuple=True)
    score = x[node, col].cpu().numpy()
    node, col = node.cpu().numpy(), col.cpu().numpy()
    keep = segment_topk(col, score, k)  # nonzero gives node order: ties stay by id
    return node[keep], col[keep], score[keep]


# -- local: forward push, one compiled loop per query ---------------------------------------
PUSH_SHRINK = 8.0
"""The local push works in phases, its bar starting at the seeds' residual and shrinking by this
factor per phase down to eps * out_degree: a node waits until it holds much mass, so at damping
0.85 it is pushed about half as often as with the final bar throughout (bench/kernels.py)."""


def _push_layout(graph: CSRGraph, damping: float, eps: float) -> dict:
    """The graph relabelled for the push kernel, most-linked nodes first, with per-edge steps.

    Pushes land on a node in proportion to its in-links, so numbering nodes by in-degree puts
    the slots the kernel hits most in a few cache lines; each row keeps its edge order, so the
    pushes (and the scores, bit for bit) are those of the original numbering. Cached on the
    graph per (damping, eps): about 12 bytes per edge and 17 per node.
    """
    key = ("push_layout", damping, eps)
    if key not in graph._cache:
        n = graph.n_nodes
        in_degree = np.bincount(graph.indices, minlength=n)
        order = np.argsort(-in_degree, kind="stable")  # new id -> old id
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        degree = graph.out_degree[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(degree, out=indptr[1:])
        pos = np.repeat(graph.indptr[order] - indptr[:-1], degree) + np.arange(indptr[-1])
        threshold = eps * np.maximum(degree, 1).astype(np.float64)
        indices = rank[graph.indices[pos]]
        graph._cache[key] = {
            "order": order,
            "rank": rank,
            "indptr": indptr,
            "indices": indices.astype(np.int32 if n < 2**31 else np.int64),
            "scaled_step": damping * graph.transition_weights[pos] / threshold[indices],
            "dangling": np.asarray(graph.dangling[order], dtype=np.bool_),
            "threshold": threshold,
        }
    return graph._cache[key]


def _best_of_query(nodes, scores, topk, within):
    """One query's pushed entries cut to the nodes in `within` and its `topk` best, best first,
    ties at the cut to the lowest ids (as exact mode); a linear selection, then a small sort."""
    if within is not None:
        inside = (nodes >= within[0]) & (nodes < within[1])
        nodes, scores = nodes[inside], scores[inside]
    if nodes.size > topk:
        keep = scores >= np.partition(scores, nodes.size - topk)[nodes.size - topk]
        nodes, scores = nodes[keep], scores[keep]  # the k best and everything tied with the kth
    order = np.lexsort((nodes, -scores))[:topk]
    return nodes[order], scores[order]


def _local(graph, seeds, damping, eps, topk=None, within=None) -> PPRResult:
    """Queue-based forward push of each query (graphrag_engine.kernels.push_jit), sharing one
    set of scratch arrays; with `topk`, each query keeps only its best entries as it finishes."""
    from graphrag_engine.kernels.push_jit import (
        push_query,  # numba loads on first use of the push, not on import
    )

    n, b = graph.n_nodes, len(seeds)
    q_all, nodes_all, w_all = normalize_seeds(seeds, n)
    lay = _push_layout(graph, damping, eps)
    seed_nodes = lay["rank"][nodes_all]
    level, score, state = np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.uint8)
    queue, touched = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    starts = np.searchsorted(q_all, np.arange(b + 1))
    parts_q, parts_n, parts_s = [], [], []
    bounds = np.empty(b)
    pushes = 0
    for q in range(b):
        lo, hi = starts[q], starts[q + 1]
        nodes, scores, bounds[q], done = push_query(
            lay["indptr"], lay["indices"], lay["scaled_step"], lay["dangling"], lay["threshold"],
            seed_nodes[lo:hi], w_all[lo:hi], damping, level, score, state, queue, touched,
            PUSH_SHRINK,
        )  # fmt: skip
        pushes = max(pushes, done)
        nodes = lay["order"][nodes]
        if topk is not None:
            nodes, scores = _best_of_query(nodes, scores, topk, within)
        parts_q.append(np.full(nodes.size, q, dtype=np.int64))
        parts_n.append(nodes)
        parts_s.append(scores)
    return PPRResult(
        n,
        b,
        query=np.concatenate(parts_q) if b else np.zeros(0, np.int64),
        node=np.concatenate(parts_n) if b else np.zeros(0, np.int64),
        score=np.concatenate(parts_s) if b else np.zeros(0),
        error_bound=bounds,
        iterations=pushes,
    )


# -- sampled: Monte-Carlo random walks with restart -----------------------------------------
def sampled_rwr(
    graph: CSRGraph,
    seeds: Sequence[SeedSpec],
    restart_prob: float = 0.15,
    walks: int = 2000,
    max_steps: int = 1000,
    seed: int = 0,
) -> PPRResult:
    """RWR estimated by sampling: `walks` walks per query, all queries stepped together.

    A walk starts at a seed (drawn by seed weight), stops with probability `restart_prob` before
    each step and at a dangling node, and otherwise follows an out-edge drawn by weight. By the
    renewal argument, a node's share of all visits estimates its exact RWR score (the same
    semantics as `random_walk_with_restart`, dangling nodes restarting), with a standard error
    that shrinks as 1 / sqrt(walks). Returns sparse entries, like the local mode.
    """
    if not 0.0 < restart_prob < 1.0:
        raise ValueError(f"restart_prob must lie in (0, 1), got {restart_prob}")
    rng = np.random.default_rng(seed)
    q_of, n_of, w_of = normalize_seeds(seeds, graph.n_nodes)
    n_q = len(seeds)
    # each query's seed weights sum to 1, so query q owns the mass [q, q + 1) of the running sum
    cum = np.cumsum(w_of)
    owner = np.repeat(np.arange(n_q), walks)
    pick = np.searchsorted(cum, owner + rng.random(owner.size), side="right")
    first = np.searchsorted(q_of, np.arange(n_q))
    last = np.r_[first[1:], q_of.size] - 1
    pos = n_of[np.clip(pick, first[owner], last[owner])]
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    cumw = np.cumsum(graph.weights) if graph.weights.size else np.zeros(0)
    strength = graph.out_strength
    visits_q, visits_n = [owner], [pos]
    for _ in range(max_steps):
        alive = (rng.random(pos.size) >= restart_prob) & (strength[pos] > 0)
        owner, pos = owner[alive], pos[alive]
        if pos.size == 0:
            break
        lo = indptr[pos]
        before = np.where(lo > 0, cumw[np.maximum(lo - 1, 0)], 0.0)
        target = before + rng.random(pos.size) * strength[pos]
        edge = np.searchsorted(cumw, target, side="right")
        edge = np.clip(edge, lo, indptr[pos + 1] - 1)
        pos = np.asarray(graph.indices[edge], dtype=np.int64)
        visits_q.append(owner)
        visits_n.append(pos)
    q_all, n_all = np.concatenate(visits_q), np.concatenate(visits_n)
    key, counts = np.unique(q_all * graph.n_nodes + n_all, return_counts=True)
    query, node = key // graph.n_nodes, key % graph.n_nodes
    totals = np.bincount(query, weights=counts, minlength=n_q)
    return PPRResult(graph.n_nodes, n_q, query=query, node=node, score=counts / totals[query])
