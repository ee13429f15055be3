"""Which GPU library should run the exact PPR step? torch vs CuPy vs torch-geometric, one run.

The exact PPR's cost is one product P^T X per step: a sparse (n x n, m entries) matrix times a
dense block of query columns. This times that product on the bench graph of bench/kernels.py
(200,000 nodes, 1,000,000 edges) for blocks of 64, 256 and 1,000 columns, float32, with:

* torch: `torch.sparse.mm` on a CSR tensor (cuSPARSE SpMM), what graphrag_engine/kernels/ppr.py runs;
* CuPy: `cupyx.scipy.sparse.csr_matrix @ cupy.ndarray` (cuSPARSE SpMM, CuPy's binding);
* torch-geometric: gather-and-scatter message passing, `x[col] * w` summed into rows with
  `torch_geometric.utils.scatter` (how its layers propagate), and `torch_geometric.utils.spmm`.

    python -m bench.gpu_stack            # needs a CUDA GPU; CuPy and torch-geometric if present

Prints a table (ms per product, ratio to torch, max difference to torch's result) and a JSON
line. A library that is not installed is reported as such.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from bench.common import write_result
from bench.kernels import power_law_graph
from graphrag_engine.kernels.graph import CSRGraph


def gpu_ms(fn, reps: int) -> tuple[float, object]:
    """Mean milliseconds of fn() on the GPU over reps calls after two warm-ups, and its result."""
    out = fn()
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1000 / reps, out


def main() -> None:
    """Time the PPR step product in each library and print the table and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--columns", default="64,256,1000")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/gpu_stack.py needs a CUDA GPU")
    dev = torch.device("cuda")
    src, dst = power_law_graph(args.nodes, args.edges, 0)
    g = CSRGraph.from_edges(src, dst, n_nodes=args.nodes)
    n = g.n_nodes
    pt = g.transition_T().astype(np.float32)
    t_pt = torch.sparse_csr_tensor(
        torch.from_numpy(pt.indptr.astype(np.int64)),
        torch.from_numpy(pt.indices.astype(np.int64)),
        torch.from_numpy(pt.data),
        size=(n, n),
    ).to(dev)
    coo = pt.tocoo()
    row = torch.from_numpy(coo.row.astype(np.int64)).to(dev)
    col = torch.from_numpy(coo.col.astype(np.int64)).to(dev)
    val = torch.from_numpy(coo.data).to(dev)
    try:
        import cupy
        import cupyx.scipy.sparse as csp

        c_pt = csp.csr_matrix(
            (cupy.asarray(pt.data), cupy.asarray(pt.indices), cupy.asarray(pt.indptr)),
            shape=(n, n),
        )
    except ImportError:
        cupy = None
    try:
        import torch_geometric.utils as pyg
    except ImportError:
        pyg = None

    rows = []
    for b in (int(c) for c in args.columns.split(",")):
        x = torch.rand((n, b), device=dev, dtype=torch.float32)
        ms_torch, ref = gpu_ms(lambda x=x: torch.sparse.mm(t_pt, x), args.reps)
        entry = {"columns": b, "torch_ms": round(ms_torch, 3)}
        if cupy is not None:
            cx = cupy.from_dlpack(x)
            ms, out = gpu_ms(lambda cx=cx: c_pt @ cx, args.reps)
            diff = float((torch.from_dlpack(out) - ref).abs().max())
            entry.update(cupy_ms=round(ms, 3), cupy_vs_torch=round(ms / ms_torch, 2))
            entry["cupy_max_diff"] = diff
        if pyg is not None:

            def scatter_step(x=x):
                return pyg.scatter(x[col] * val[:, None], row, dim=0, dim_size=n, reduce="sum")

            ms, out = gpu_ms(scatter_step, args.reps)
            entry.update(pyg_scatter_ms=round(ms, 3), pyg_scatter_vs_torch=round(ms / ms_torch, 2))
            entry["pyg_scatter_max_diff"] = float((out - ref).abs().max())
            try:
                ms, out = gpu_ms(lambda x=x: pyg.spmm(t_pt, x, reduce="sum"), args.reps)
            except (RuntimeError, TypeError, ValueError) as err:  # its sparse formats vary
                entry["pyg_spmm_error"] = f"{type(err).__name__}: {err}"[:200]
            else:
                entry.update(pyg_spmm_ms=round(ms, 3), pyg_spmm_vs_torch=round(ms / ms_torch, 2))
                entry["pyg_spmm_max_diff"] = float((out - ref).abs().max())
        rows.append(entry)
        del x, ref

    name = torch.cuda.get_device_name(dev)
    print(f"P^T X on {name}: {n} nodes, {pt.nnz} entries, float32, mean of {args.reps} products")
    print(f"{'columns':>8}{'torch ms':>10}{'CuPy ms':>10}{'x torch':>9}{'PyG scatter':>12}")
    for r in rows:
        cu = (r.get("cupy_ms", "-"), r.get("cupy_vs_torch", "-"))
        print(f"{r['columns']:>8}{r['torch_ms']:>10}{cu[0]:>10}{cu[1]:>9}", end="")
        print(f"{r.get('pyg_scatter_ms', '-'):>12}{r.get('pyg_scatter_vs_torch', '-'):>9}")
    write_result(
        "gpu_stack",
        {
            "bench": "gpu_stack",
            "device": name,
            "torch": torch.__version__,
            "cupy": None if cupy is None else cupy.__version__,
            "torch_geometric": None if pyg is None else __import__("torch_geometric").__version__,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
