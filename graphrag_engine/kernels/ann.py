"""Approximate cosine search with faiss: HNSW (graph) or IVF (inverted lists) over L2-normalized
vectors, behind the same (scores, ids) contract as `graphrag_engine.kernels.similarity.cosine_topk`.

Both are built once from a vector table (read in blocks, so a memory-mapped table is normalized
a block at a time) and saved to a file, so a large table pays for its build once. IVF moves to
every GPU when faiss-gpu sees one; HNSW has no faiss GPU form and stays on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from graphrag_engine.kernels.similarity import l2_normalize

ADD_BLOCK = 65536
IVF_TRAIN_PER_LIST = 40  # k-means training points per inverted list (faiss warns below 39)
IVF_TRAIN_ITERATIONS = 10


@dataclass(frozen=True)
class AnnParams:
    """How an ANN index is built and searched."""

    kind: str = "hnsw"
    """'hnsw' or 'ivf'."""
    hnsw_m: int = 32
    hnsw_ef_construction: int = 80
    hnsw_ef_search: int = 128
    ivf_lists: int = 0
    """0: 4 * sqrt(rows), at least 1."""
    ivf_probe: int = 32

    def build_key(self) -> dict[str, int | str]:
        """The settings a built index depends on (search-time ones excluded)."""
        d = asdict(self)
        del d["hnsw_ef_search"], d["ivf_probe"]
        return d


def ivf_lists_for(rows: int, asked: int = 0) -> int:
    """Inverted lists of an IVF index over `rows` vectors: `asked`, or 4 * sqrt(rows), at most
    one per IVF_TRAIN_PER_LIST rows (k-means needs that many points per list)."""
    return max(1, min(rows // IVF_TRAIN_PER_LIST, asked or int(4 * math.sqrt(rows))))


class AnnIndex:
    """A faiss inner-product index over normalized vectors, searched like `cosine_topk`."""

    def __init__(self, index, params: AnnParams, lists: int | None = None, gpu: bool = False):
        self._index, self.params, self._gpu = index, params, gpu
        self._lists = lists if lists is not None else int(getattr(index, "nlist", 0))

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        params: AnnParams,
        seed: int = 1234,
        on_added: Callable[[int], object] | None = None,
    ) -> AnnIndex:
        """Build from an (n, d) matrix (may be memory-mapped), normalizing block by block;
        `on_added(rows)` after each block."""
        import faiss

        n, dim = vectors.shape
        if params.kind == "hnsw":
            index = faiss.IndexHNSWFlat(dim, params.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = params.hnsw_ef_construction
        elif params.kind == "ivf":
            lists = ivf_lists_for(n, params.ivf_lists)
            index = faiss.IndexIVFFlat(
                faiss.IndexFlatIP(dim), dim, lists, faiss.METRIC_INNER_PRODUCT
            )
            index.cp.seed, index.cp.niter = seed, IVF_TRAIN_ITERATIONS
            take = min(n, lists * IVF_TRAIN_PER_LIST)
            rows = np.sort(np.random.default_rng(seed).choice(n, take, replace=False))
            index.train(np.ascontiguousarray(l2_normalize(vectors[rows])))
        else:
            raise ValueError(f"ANN kind must be 'hnsw' or 'ivf', got {params.kind!r}")
        for lo in range(0, n, ADD_BLOCK):
            block = np.ascontiguousarray(l2_normalize(vectors[lo : lo + ADD_BLOCK]))
            index.add(block)
            if on_added is not None:
                on_added(len(block))
        return cls(index, params)

    @classmethod
    def load(cls, path: Path, params: AnnParams) -> AnnIndex:
        """An index saved by `save`."""
        import faiss

        return cls(faiss.read_index(str(path)), params)

    def save(self, path: Path) -> None:
        """Write the index to `path` (the caller makes the write atomic)."""
        import faiss

        faiss.write_index(self._cpu_index(), str(path))

    @property
    def ntotal(self) -> int:
        """Number of stored vectors."""
        return int(self._index.ntotal)

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return int(self._index.d)

    def to_gpu(self) -> AnnIndex:
        """This index on every GPU faiss sees (IVF only); itself when none or for HNSW."""
        import faiss

        gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        if gpus == 0 or self.params.kind != "ivf" or self._gpu:
            return self
        # several GPUs give an opaque replica index without nlist / nprobe: keep the list count
        # and set search parameters through faiss' parameter space
        return AnnIndex(faiss.index_cpu_to_all_gpus(self._index), self.params, self._lists, True)

    def _cpu_index(self):
        import faiss

        return faiss.index_gpu_to_cpu(self._index) if self._gpu else self._index

    def _set(self, name: str, value: int) -> None:
        """A search parameter (efSearch, nprobe) on this index, on the CPU or on GPUs."""
        import faiss

        space = faiss.GpuParameterSpace() if self._gpu else faiss.ParameterSpace()
        space.set_index_parameter(self._index, name, value)

    def search(
        self, queries: np.ndarray, k: int, normalized: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), each (n_queries, k), best first; -inf / -1 where fewer were found."""
        q = np.asarray(queries, dtype=np.float32)
        q = np.ascontiguousarray(q if normalized else l2_normalize(q))
        if len(q) == 0 or k == 0 or self.ntotal == 0:
            return np.full((len(q), k), -np.inf, np.float32), np.full((len(q), k), -1, np.int64)
        kk = min(k, self.ntotal)
        if self.params.kind == "hnsw":
            self._set("efSearch", max(self.params.hnsw_ef_search, kk))
        else:  # faiss on a GPU probes at most 2,048 lists
            self._set(
                "nprobe", min(self.params.ivf_probe, self._lists, 2048 if self._gpu else 1 << 30)
            )
        scores, ids = self._index.search(q, kk)
        out_s = np.full((len(q), k), -np.inf, np.float32)
        out_i = np.full((len(q), k), -1, np.int64)
        out_s[:, :kk] = np.where(ids < 0, -np.inf, scores)
        out_i[:, :kk] = ids
        return out_s, out_i
