"""Cosine similarity: blocked top-k with bounded memory, an exact faiss index behind the same
interface, and cross-set similarity matrices.

Memory of `cosine_topk` is bounded by one (block_queries x block_candidates) score block plus
the running top-k, whatever the sizes of the two matrices: 100,000 x 1,000,000 x 384 runs
with the defaults in about 0.3 GiB for scores plus at most `cache_bytes` (0.5 GiB) of
normalized candidate blocks kept for the next query block; the inputs may be memory-mapped.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, eps)


def cosine_matrix(a: np.ndarray, b: np.ndarray, normalized: bool = False) -> np.ndarray:
    """Full (len(a), len(b)) cosine similarity matrix; for sets small enough to hold."""
    if not normalized:
        a, b = l2_normalize(a), l2_normalize(b)
    return np.asarray(a, dtype=np.float32) @ np.asarray(b, dtype=np.float32).T


def rowwise_dot(
    queries: np.ndarray, owner: np.ndarray, vectors: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """Dot products of every flat (query owner[i], vector rows[i]) pair in one
    gather-multiply-sum: a batch's similarity call over candidates of different questions."""
    if owner.size == 0:
        return np.zeros(0, dtype=np.float32)
    if owner.size < JIT_PAIRS or not isinstance(vectors, np.ndarray):
        return np.einsum("ij,ij->i", queries[owner], np.asarray(vectors[rows], dtype=np.float32))
    from graphrag_engine.kernels.dot_jit import pair_dots  # numba loads on first large call

    q = np.ascontiguousarray(queries, dtype=np.float32)
    v = vectors if vectors.dtype == np.float32 else vectors.astype(np.float32)
    return pair_dots(q, owner.astype(np.int64), v, np.asarray(rows, dtype=np.int64))


JIT_PAIRS = 4096
"""Pairs from which `rowwise_dot` runs compiled: below it numpy's gathers are cheap."""


def csr_row_topk(
    queries: np.ndarray,
    rows: np.ndarray,
    indptr: np.ndarray,
    members: np.ndarray,
    vectors: np.ndarray,
    k: int,
    exclude: list[tuple[int, ...]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat (item, member, score) arrays: for item i, the k distinct members of CSR row
    `rows[i]` (members ascending within a row) not in `exclude[i]` whose `vectors` have the
    largest dot product with `queries[i]`, best first, the lower member first on ties.

    The exact top-k of a beam step over an adjacency list, in one compiled pass that reads each
    candidate's vector once and keeps k scores per item: its cost is the candidates' dot
    products alone, with no (candidates x dim) gather and no sort of every candidate, which is
    what made a hub entity's expansion grow faster than its degree."""
    from graphrag_engine.kernels.dot_jit import csr_topk_dots  # numba loads on first call

    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0 or k < 1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    exclude = exclude or [()] * rows.size
    skip_ptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum([len(e) for e in exclude], out=skip_ptr[1:])
    skip = np.fromiter((u for e in exclude for u in e), dtype=np.int64, count=int(skip_ptr[-1]))
    q = np.ascontiguousarray(queries, dtype=np.float32)
    indptr, members = np.asarray(indptr, np.int64), np.asarray(members, np.int64)  # no copy
    best, score, filled = csr_topk_dots(q, rows, indptr, members, vectors, skip_ptr, skip, k)
    keep = np.arange(k)[None, :] < filled[:, None]
    owner = np.broadcast_to(np.arange(rows.size)[:, None], best.shape)
    return owner[keep], best[keep], score[keep]


def cosine_topk(
    queries: np.ndarray,
    candidates: np.ndarray,
    k: int,
    *,
    normalized: bool = False,
    block_queries: int = 2048,
    block_candidates: int = 32768,
    device: str = "cpu",
    cache_bytes: int = 512 * 2**20,
    on_block: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k candidates by cosine for every query: (scores, ids), each (n_queries, k), best first.

    Candidates are streamed in blocks and merged into a running top-k, so neither the full
    score matrix nor a normalized copy of the candidates is ever held. Ids are -1 and scores
    -inf where there are fewer than k candidates. `on_block` hears how many queries each
    finished block held (a caller's progress).
    """
    import torch

    on_device = isinstance(candidates, torch.Tensor)  # a TorchFlatIndex table on its device
    if on_device:
        device = str(candidates.device)
    nq, nc = len(queries), len(candidates)
    kk = min(k, nc)
    out_scores = np.full((nq, k), -np.inf, dtype=np.float32)
    out_ids = np.full((nq, k), -1, dtype=np.int64)
    if nq == 0 or kk == 0:
        return out_scores, out_ids
    cand_blocks = []  # normalized candidate blocks are re-used for every query block
    reuse = nq > block_queries and nc * candidates.shape[1] * 4 <= cache_bytes
    for q0 in range(0, nq, block_queries):
        q = np.asarray(queries[q0 : q0 + block_queries], dtype=np.float32)
        qt = torch.from_numpy(q if normalized else l2_normalize(q)).to(device)
        best_s = torch.full((len(q), kk), -torch.inf, device=device)
        best_i = torch.full((len(q), kk), -1, dtype=torch.int64, device=device)
        for bi, c0 in enumerate(range(0, nc, block_candidates)):
            if on_device:
                ct = candidates[c0 : c0 + block_candidates]
            elif bi < len(cand_blocks):
                ct = cand_blocks[bi]
            else:
                c = np.asarray(candidates[c0 : c0 + block_candidates], dtype=np.float32)
                if not c.flags.writeable:  # a read-only memory map: torch wants its own copy
                    c = c.copy()
                ct = torch.from_numpy(c if normalized else l2_normalize(c)).to(device)
                if reuse:
                    cand_blocks.append(ct)
            scores = qt @ ct.T
            s, i = torch.topk(scores, min(kk, scores.shape[1]), dim=1)
            merged_s = torch.cat([best_s, s], dim=1)
            merged_i = torch.cat([best_i, i + c0], dim=1)
            best_s, pos = torch.topk(merged_s, kk, dim=1)
            best_i = torch.gather(merged_i, 1, pos)
        out_scores[q0 : q0 + len(q), :kk] = best_s.cpu().numpy()
        out_ids[q0 : q0 + len(q), :kk] = best_i.cpu().numpy()
        if on_block is not None:
            on_block(len(q))
    return out_scores, out_ids


class TorchFlatIndex:
    """Exact cosine search with the blocked torch kernel (CPU or CUDA). On a GPU the
    normalised table moves to the device at the first search and stays there, so repeated
    searches do not copy it again."""

    def __init__(self, dim: int, device: str = "cpu") -> None:
        self.dim, self.device = dim, device
        self._blocks: list[np.ndarray] = []
        self._matrix = None  # numpy on the CPU, a torch tensor on a GPU

    def add(self, vectors: np.ndarray) -> None:
        """Append vectors (normalized on the way in)."""
        self._blocks.append(l2_normalize(vectors))
        self._matrix = None

    @property
    def ntotal(self) -> int:
        """Number of stored vectors."""
        return sum(len(b) for b in self._blocks)

    def search(
        self, queries: np.ndarray, k: int, normalized: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the top-k, best first (`normalized`: the queries already are)."""
        if self._matrix is None:
            matrix = (
                np.concatenate(self._blocks)
                if self._blocks
                else np.zeros((0, self.dim), np.float32)
            )
            if self.device != "cpu":
                import torch

                matrix = torch.from_numpy(np.ascontiguousarray(matrix)).to(self.device)
            self._matrix = matrix
        q = queries if normalized else l2_normalize(queries)
        return cosine_topk(q, self._matrix, k, normalized=True, device=self.device)
