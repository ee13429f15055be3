"""GPU paths (CUDA torch, faiss-gpu, cuGraph); skipped without a GPU. Not exercised in CI."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.graph import CSRGraph
from kernels.similarity import cosine_topk, make_vector_index

from .gpu import needs_cuda

pytestmark = pytest.mark.gpu


@needs_cuda
def test_cosine_topk_cuda_equals_cpu() -> None:
    rng = np.random.default_rng(0)
    q, c = rng.normal(size=(300, 64)), rng.normal(size=(20_000, 64))
    cpu_s, cpu_i = cosine_topk(q, c, 10)
    gpu_s, gpu_i = cosine_topk(q, c, 10, device="cuda")
    np.testing.assert_allclose(cpu_s, gpu_s, atol=1e-4)
    assert (cpu_i == gpu_i).mean() > 0.99


@needs_cuda
def test_faiss_gpu_index_equals_torch() -> None:
    faiss = pytest.importorskip("faiss")
    if not hasattr(faiss, "StandardGpuResources"):
        pytest.skip("faiss without GPU support")
    rng = np.random.default_rng(1)
    data, queries = rng.normal(size=(5000, 32)), rng.normal(size=(40, 32))
    a, b = (
        make_vector_index(32, "faiss", device="cuda"),
        make_vector_index(32, "torch", device="cuda"),
    )
    a.add(data)
    b.add(data)
    np.testing.assert_allclose(a.search(queries, 5)[0], b.search(queries, 5)[0], atol=1e-4)


@needs_cuda
def test_cugraph_view_has_same_edges() -> None:
    pytest.importorskip("cugraph")
    rng = np.random.default_rng(2)
    g = CSRGraph.from_edges(rng.integers(0, 100, 400), rng.integers(0, 100, 400), n_nodes=100)
    cg = g.to_cugraph()
    assert cg.number_of_edges() == g.n_entries
