"""GPU paths (CUDA torch, faiss-gpu); skipped without a GPU. Not exercised in CI.

The torch kernels (exact PPR by power iteration and BiCGSTAB, RWR, cosine top-k, the flat
vector index) must give their CPU results on CUDA. The forward push (numba), shortest paths
(scipy) and the segment operators (numpy) run on the CPU only.
"""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.ppr import personalized_pagerank, random_walk_with_restart
from graphrag_engine.kernels.similarity import TorchFlatIndex, cosine_topk, l2_normalize
from tests.cuda import needs_cuda

pytestmark = pytest.mark.gpu


@needs_cuda
def test_cosine_topk_cuda_equals_cpu() -> None:
    rng = np.random.default_rng(0)
    q, c = rng.normal(size=(300, 64)), rng.normal(size=(20_000, 64))
    cpu_s, cpu_i = cosine_topk(q, c, 10)
    gpu_s, gpu_i = cosine_topk(q, c, 10, device="cuda")
    np.testing.assert_allclose(cpu_s, gpu_s, atol=1e-4)
    assert (cpu_i == gpu_i).mean() > 0.99


def _random_graph(n: int = 3000, m: int = 15_000, seed: int = 3) -> CSRGraph:
    """A weighted random digraph with some dangling nodes."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    src = np.where(src % 17 == 0, (src + 1) % n, src)  # nodes divisible by 17 keep no out-edge
    return CSRGraph.from_edges(src, dst, rng.uniform(0.1, 2.0, m), n_nodes=n)


@needs_cuda
@pytest.mark.parametrize("solver", ["power", "bicgstab"])
@pytest.mark.parametrize("dtype", ["mixed", "float64", "float32"])
@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_exact_ppr_cuda_equals_cpu(solver: str, dtype: str, damping: float) -> None:
    g = _random_graph()
    rng = np.random.default_rng(4)
    seeds = [rng.choice(g.n_nodes, int(rng.integers(1, 6)), replace=False) for _ in range(70)]
    kw = dict(solver=solver, dtype=dtype, tol=1e-8, batch_size=32)
    cpu = personalized_pagerank(g, seeds, damping, **kw)
    gpu = personalized_pagerank(g, seeds, damping, device="cuda", **kw)
    # float64 agrees to rounding; mixed and float32 run the sparse products in float32, whose
    # rounding differs between cuSPARSE and the CPU: float32's relative precision
    if dtype == "float64":
        np.testing.assert_allclose(gpu.dense, cpu.dense, rtol=1e-9, atol=1e-12)
    else:
        np.testing.assert_allclose(gpu.dense, cpu.dense, rtol=2e-6, atol=1e-7)
    if dtype == "float64":
        assert abs(gpu.iterations - cpu.iterations) <= 2
    nodes_cpu, _ = cpu.topk(20)
    nodes_gpu, _ = gpu.topk(20)
    assert (nodes_cpu == nodes_gpu).mean() > 0.99  # ties may swap at float32 precision


@needs_cuda
def test_exact_ppr_cuda_batched_equals_alone() -> None:
    """Each column stops when it converges, as alone; not bit for bit as on the CPU, since the
    GPU's sparse product may sum a column in another order for another block width."""
    g = _random_graph(seed=5)
    seeds = [[1, 2], {7: 2.0, 30: 1.0}, [100]]
    both = personalized_pagerank(g, seeds, 0.85, device="cuda", tol=1e-9)
    for i, s in enumerate(seeds):
        alone = personalized_pagerank(g, [s], 0.85, device="cuda", tol=1e-9)
        np.testing.assert_allclose(both.dense[:, i], alone.dense[:, 0], rtol=2e-6, atol=1e-12)


@needs_cuda
def test_rwr_cuda_equals_cpu() -> None:
    g = _random_graph(seed=6)
    seeds = [[0], [5, 9], [42]]
    cpu = random_walk_with_restart(g, seeds, 0.3, tol=1e-9)
    gpu = random_walk_with_restart(g, seeds, 0.3, tol=1e-9, device="cuda")
    np.testing.assert_allclose(gpu.dense, cpu.dense, rtol=2e-6, atol=1e-12)


@needs_cuda
def test_exact_ppr_topk_on_cuda_equals_cpu() -> None:
    """The top-k picked on the GPU is the CPU's: same nodes, same order, same scores."""
    g = _random_graph(seed=8)
    rng = np.random.default_rng(9)
    seeds = [rng.choice(g.n_nodes, int(rng.integers(1, 4)), replace=False) for _ in range(50)]
    kw = dict(dtype="float64", tol=1e-10, topk=30, batch_size=16)
    cpu = personalized_pagerank(g, seeds, 0.85, **kw).topk(30)
    gpu = personalized_pagerank(g, seeds, 0.85, device="cuda", **kw).topk(30)
    assert (gpu[0] == cpu[0]).mean() > 0.995  # only near-ties may swap
    np.testing.assert_allclose(np.sort(gpu[1], 1), np.sort(cpu[1], 1), rtol=1e-9)


@needs_cuda
def test_torch_flat_index_cuda_equals_cpu() -> None:
    rng = np.random.default_rng(7)
    data, queries = rng.normal(size=(9000, 48)), rng.normal(size=(60, 48))
    cpu, gpu = TorchFlatIndex(48), TorchFlatIndex(48, device="cuda")
    for index in (cpu, gpu):
        index.add(data[:5000])
        index.add(data[5000:])
    (cs, ci), (gs, gi) = cpu.search(queries, 8), gpu.search(queries, 8)
    np.testing.assert_allclose(gs, cs, atol=1e-5)
    assert (gi == ci).mean() > 0.99


@needs_cuda
def test_faiss_gpu_index_equals_torch() -> None:
    faiss = pytest.importorskip("faiss")
    if not hasattr(faiss, "StandardGpuResources"):
        pytest.skip("faiss without GPU support")
    rng = np.random.default_rng(1)
    data, queries = rng.normal(size=(5000, 32)), rng.normal(size=(40, 32))
    a = faiss.index_cpu_to_all_gpus(faiss.IndexFlatIP(32))
    a.add(np.ascontiguousarray(l2_normalize(data)))
    b = TorchFlatIndex(32, device="cuda")
    b.add(data)
    got, _ = a.search(np.ascontiguousarray(l2_normalize(queries)), 5)
    np.testing.assert_allclose(got, b.search(queries, 5)[0], atol=1e-4)


@needs_cuda
def test_flat_index_on_the_device_searches_as_the_cpu_kernel() -> None:
    """A vector table kept on the GPU (retrieval.device: cuda) finds the CPU's neighbours,
    search after search."""
    rng = np.random.default_rng(2)
    table = rng.standard_normal((70_000, 64)).astype(np.float32)
    queries = rng.standard_normal((300, 64)).astype(np.float32)
    cpu_s, cpu_i = cosine_topk(queries, table, 10)
    index = TorchFlatIndex(64, device="cuda")
    index.add(table)
    index.search(queries[:5], 10)  # the table moves to the device here and stays
    gpu_s, gpu_i = index.search(queries, 10)
    np.testing.assert_allclose(gpu_s, cpu_s, atol=1e-5)
    assert np.mean(gpu_i == cpu_i) > 0.999


@needs_cuda
@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_exact_topk_within_a_range_on_cuda_equals_cpu(damping: float) -> None:
    """The passages' top-k picked on the GPU are the CPU's (float64, so no near-tie swaps)."""
    from graphrag_engine.kernels.graph import CSRGraph
    from graphrag_engine.kernels.ppr import personalized_pagerank

    rng = np.random.default_rng(8)
    g = CSRGraph.from_edges(
        rng.integers(0, 3000, 15000), rng.integers(0, 3000, 15000), n_nodes=3000
    )
    seeds = [[int(s)] for s in rng.integers(0, 3000, 40)]
    kw = dict(dtype="float64", tol=1e-12, topk=25, within=(500, 2000))
    cpu, _ = personalized_pagerank(g, seeds, damping, **kw).topk(25)
    gpu, _ = personalized_pagerank(g, seeds, damping, device="cuda", **kw).topk(25)
    assert np.array_equal(cpu, gpu)
