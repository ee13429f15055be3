"""Compiled forward push for one PPR query (numba): the inner loop of `ppr.personalized_pagerank`'s
local mode, kept apart so that importing `graphrag_engine.kernels.ppr` does not import numba.

The kernel is the queue-based push of Andersen, Chung & Lang (2006): a node enters a FIFO queue
when its residual reaches a bar; popping it moves (1 - d) of the residual into its score and
spreads d of it over its out-edges (or, at a dangling node, back onto the query's seeds). The
bar starts at the seeds' residual and shrinks by `shrink` each time the queue runs dry, down
to eps * out_degree, where the push stops (annealing: mass gathers before it moves, fewer
pushes at high damping; the result obeys the same eps rule, hence the same error bound). Scratch arrays of one slot per node are passed in and handed back cleared, so a batch
of queries costs its pushes, not n per query.
"""

from __future__ import annotations

import numpy as np
from numba import njit

SEEN, QUEUED = 1, 2  # bits of a node's state byte


@njit(cache=True, nogil=True)
def push_query(
    indptr: np.ndarray,
    indices: np.ndarray,
    scaled_step: np.ndarray,
    dangling: np.ndarray,
    threshold: np.ndarray,
    seed_nodes: np.ndarray,
    seed_weights: np.ndarray,
    damping: float,
    level: np.ndarray,
    score: np.ndarray,
    state: np.ndarray,
    queue: np.ndarray,
    touched: np.ndarray,
    shrink: float,
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """(nodes, scores, L1 error bound, pushes) of one query; scratch arrays come back zeroed.

    Residuals are held as levels, residual / threshold, so that the final bar is a level of 1
    and an edge costs two random reads (level, state):
    `scaled_step[e]` = d * (edge weight / out-strength) / threshold[head of e]. `level`,
    `score` (float64) and `state` (uint8) are zeroed n-slot scratch arrays, `queue` and
    `touched` n-slot int64 buffers.
    """
    n = level.size
    n_touched = 0
    head = 0
    tail = 0  # the queue is circular: a node is in it at most once, so n slots suffice
    size = 0
    for i in range(seed_nodes.size):
        s = seed_nodes[i]
        if state[s] == 0:
            state[s] = SEEN
            touched[n_touched] = s
            n_touched += 1
        level[s] += seed_weights[i] / threshold[s]
    keep = 1.0 - damping
    pushes = 0
    bar = 1.0
    for i in range(seed_nodes.size):
        bar = max(bar, level[seed_nodes[i]])
    # The enqueue step is written out at its three places: numba compiles a helper that
    # returns (tail, size) into slower code than the inline loop.
    while True:
        for i in range(n_touched):
            s = touched[i]
            if state[s] == SEEN and level[s] >= bar:
                state[s] = SEEN | QUEUED
                queue[tail] = s
                tail += 1
                if tail == n:
                    tail = 0
                size += 1
        while size > 0:
            u = queue[head]
            head += 1
            if head == n:
                head = 0
            size -= 1
            state[u] = SEEN
            r = level[u] * threshold[u]
            level[u] = 0.0
            score[u] += keep * r
            pushes += 1
            if dangling[u]:  # restart: the walk's mass returns to the query's seeds
                for i in range(seed_nodes.size):
                    v = seed_nodes[i]
                    level[v] += damping * r * seed_weights[i] / threshold[v]
                    if state[v] == SEEN and level[v] >= bar:
                        state[v] = SEEN | QUEUED
                        queue[tail] = v
                        tail += 1
                        if tail == n:
                            tail = 0
                        size += 1
                continue
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                flags = state[v]
                if flags == 0:
                    flags = SEEN
                    touched[n_touched] = v
                    n_touched += 1
                x = level[v] + r * scaled_step[e]
                level[v] = x
                if flags == SEEN and x >= bar:
                    flags = SEEN | QUEUED
                    queue[tail] = v
                    tail += 1
                    if tail == n:
                        tail = 0
                    size += 1
                state[v] = flags
        if bar <= 1.0:
            break
        bar = max(1.0, bar / shrink)  # the queue ran dry: lower the bar, queue who reaches it
    # Absorb what is left: ppr_u(u) >= 1 - d, so adding (1 - d) r(u) to u keeps p <= p_exact
    # and shrinks the L1 gap from sum(r) to d * sum(r).
    nodes = np.empty(n_touched, dtype=np.int64)
    scores = np.empty(n_touched, dtype=np.float64)
    left = 0.0
    kept = 0
    for i in range(n_touched):
        u = touched[i]
        r = level[u] * threshold[u]
        left += r
        value = score[u] + keep * r
        if value > 0.0:
            nodes[kept] = u
            scores[kept] = value
            kept += 1
        level[u] = 0.0
        score[u] = 0.0
        state[u] = 0
    return nodes[:kept], scores[:kept], damping * left, pushes
