"""CSR graph container shared by every kernel, with zero-copy scipy / torch views."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from graphrag_engine.kernels.segments import csr_order


def torch_csr(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n: int,
    device: str = "cpu",
    dtype=None,
):
    """A square torch sparse CSR tensor over numpy arrays (shared memory on CPU where dtypes allow)."""
    import torch

    dtype = dtype or torch.float64
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        t = torch.sparse_csr_tensor(
            torch.from_numpy(indptr),
            torch.from_numpy(indices),
            torch.from_numpy(data).to(dtype),
            size=(n, n),
            check_invariants=False,
        )
    return t.to(device)


@dataclass(frozen=True, eq=False)
class CSRGraph:
    """Out-edge adjacency in CSR form.

    `indices[indptr[u]:indptr[u+1]]` are the heads of u's out-edges, `weights` their weights
    and `edge_ids` the id of the input edge each entry came from (an undirected input edge
    appears twice, once per direction, with the same id). `node_type` labels nodes of a
    multi-partite graph (e.g. 0 chunk, 1 unit, 2 entity).
    """

    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    edge_ids: np.ndarray
    directed: bool = True
    node_type: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    @staticmethod
    def from_edges(
        src: np.ndarray,
        dst: np.ndarray,
        weights: np.ndarray | None = None,
        n_nodes: int | None = None,
        directed: bool = True,
        node_type: np.ndarray | None = None,
    ) -> CSRGraph:
        """Build from parallel edge arrays; undirected graphs store both directions."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if src.shape != dst.shape:
            raise ValueError(f"src and dst differ in length ({src.size} vs {dst.size})")
        w = np.ones(src.size) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != src.shape:
            raise ValueError("weights must have one value per edge")
        if w.size and (not np.all(np.isfinite(w)) or w.min() < 0):
            raise ValueError("edge weights must be finite and non-negative")
        n = (
            int(n_nodes)
            if n_nodes is not None
            else int(max(src.max(initial=-1), dst.max(initial=-1)) + 1)
        )
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError(f"edge endpoints must lie in [0, {n})")
        eid = np.arange(src.size, dtype=np.int64)
        if not directed:
            # both directions; a self-loop thus appears twice, as in igraph (degree counts it 2x)
            src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
            w, eid = np.concatenate([w, w]), np.concatenate([eid, eid])
        indptr, order = csr_order(src, dst, n)
        dst, w, eid = dst[order], w[order], eid[order]
        # int32 indices when they fit: half the memory, and scipy keeps them without a copy
        idx = np.int32 if max(n, src.size) < 2**31 - 1 else np.int64
        indptr = indptr.astype(idx)
        dst = dst.astype(idx)
        if node_type is not None:
            node_type = np.asarray(node_type)
            if node_type.shape != (n,):
                raise ValueError(f"node_type must have one entry per node ({n})")
        return CSRGraph(indptr, dst, w, eid, directed, node_type)

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return self.indptr.size - 1

    @property
    def n_entries(self) -> int:
        """Stored (directed) adjacency entries; 2x the edges of an undirected graph."""
        return self.indices.size

    @cached_property
    def out_degree(self) -> np.ndarray:
        """Number of out-entries per node."""
        return np.diff(self.indptr)

    @cached_property
    def out_strength(self) -> np.ndarray:
        """Sum of out-edge weights per node."""
        return np.bincount(self.tails, weights=self.weights, minlength=self.n_nodes)

    @cached_property
    def tails(self) -> np.ndarray:
        """Tail node of every stored entry (the row index of CSR, expanded)."""
        return np.repeat(np.arange(self.n_nodes, dtype=np.int64), self.out_degree)

    @cached_property
    def transition_weights(self) -> np.ndarray:
        """weights / out_strength of the tail: the random-walk step probability of each entry."""
        strength = np.repeat(self.out_strength, self.out_degree)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(strength > 0, self.weights / strength, 0.0)

    @cached_property
    def dangling(self) -> np.ndarray:
        """Boolean mask of nodes without out-weight (the walk restarts from them)."""
        return self.out_strength <= 0

    def to_scipy(self) -> sp.csr_matrix:
        """Zero-copy scipy CSR view (rows are tails, columns heads)."""
        n = self.n_nodes
        return sp.csr_matrix((self.weights, self.indices, self.indptr), shape=(n, n), copy=False)

    def transition_T(self) -> sp.csr_matrix:
        """P^T as scipy CSR (float64, duplicates summed): row v holds the step probabilities of
        the edges u -> v, so P^T x is one random-walk step of the mass x."""
        if "transition_T" not in self._cache:
            n = self.n_nodes
            p = sp.csr_matrix((self.transition_weights, self.indices, self.indptr), shape=(n, n))
            pt = p.T.tocsr()
            pt.sum_duplicates()
            self._cache["transition_T"] = pt
        return self._cache["transition_T"]

    def to_torch(self, device: str = "cpu", dtype=None):
        """torch sparse CSR tensor of the weights (zero-copy on CPU for float64)."""
        return torch_csr(self.indptr, self.indices, self.weights, self.n_nodes, device, dtype)

    def transposed(self) -> CSRGraph:
        """The graph with every edge reversed (in-edges become out-edges)."""
        key = "transposed"
        if key not in self._cache:
            src = self.tails
            g = CSRGraph.from_edges(
                self.indices, src, self.weights, self.n_nodes, True, self.node_type
            )
            # keep original edge ids
            order = np.lexsort((src, self.indices))
            self._cache[key] = CSRGraph(
                g.indptr, g.indices, g.weights, self.edge_ids[order], True, self.node_type
            )
        return self._cache[key]

    def neighbors(self, node: int) -> np.ndarray:
        """Heads of the out-edges of `node`."""
        return self.indices[self.indptr[node] : self.indptr[node + 1]]
