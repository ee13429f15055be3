"""Kernel benchmark: batched PPR (exact and local), shortest paths and cosine top-k against
igraph, networkx and numpy, all measured in the same run on one seeded graph.

    .venv/bin/python -m bench.kernels                 # 200,000 nodes, 1,000,000 edges, 1,000 queries
    .venv/bin/python -m bench.kernels --nodes 20000 --edges 100000 --queries 200   # quick
    python -m bench.kernels --device cuda --exact-queries 1000 --exact-batch 1000   # GPU

With --device cuda the exact PPR and cosine top-k run on the GPU (igraph, networkx, numpy and
the forward push stay on the CPU, as they only run there). Prints a table and a JSON line.
"""

from __future__ import annotations

import argparse

import igraph as ig
import networkx as nx
import numpy as np

from bench.common import timed, write_result
from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.paths import shortest_paths
from graphrag_engine.kernels.ppr import personalized_pagerank
from graphrag_engine.kernels.similarity import cosine_topk


def power_law_graph(n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Directed Chung-Lu graph with Pareto(1.2) expected degrees; no self-loops or multi-edges."""
    rng = np.random.default_rng(seed)
    weight = rng.pareto(1.2, n) + 1.0
    p = weight / weight.sum()
    src = rng.choice(n, int(m * 1.06), p=p)
    dst = rng.choice(n, int(m * 1.06), p=rng.permutation(p))
    keep = src != dst
    edges = np.unique(np.stack([src[keep], dst[keep]], axis=1), axis=0)
    edges = edges[rng.permutation(len(edges))[:m]]
    return edges[:, 0], edges[:, 1]


def top_agreement(ref: np.ndarray, nodes: np.ndarray, k: int, tie_tol: float = 0.0) -> float:
    """Share of the first k entries of `nodes` that belong to the reference top-k.

    Only nodes with a positive reference score count (when fewer than k are reachable, the
    zero tail is an arbitrary tie). With tie_tol > 0 a node also counts when its reference
    score is within tie_tol of the k-th score: nodes tied at the cut (common: leaves of the
    same parent get equal PPR) make the plain top-k set itself arbitrary.
    """
    top = np.argpartition(-ref, k)[:k]
    top = top[ref[top] > 0]
    if top.size == 0:
        return 1.0
    kth = ref[top].min()
    got = nodes[: top.size]
    got = got[got >= 0]
    if tie_tol > 0:
        return float(np.sum(ref[got] >= kth - tie_tol)) / top.size
    return len(set(top.tolist()) & set(got.tolist())) / top.size


def bench_ppr(g, G_ig, G_nx, seeds, damping, args) -> dict:
    """igraph / networkx per query, exact batched and local batched PPR at one damping."""
    k = 100
    sample = seeds[: args.igraph_sample]
    one = lambda s: np.array(G_ig.personalized_pagerank(damping=damping, reset_vertices=s))  # noqa: E731
    ref, t_ig = timed(lambda: [one(s) for s in sample])
    ig_qps = len(sample) / t_ig
    nx_qps = None
    if G_nx is not None:
        few = seeds[: args.networkx_sample]
        _, t_nx = timed(
            lambda: [
                nx.pagerank(G_nx, alpha=damping, personalization=dict.fromkeys(s, 1.0), tol=1e-6)
                for s in few
            ]
        )
        nx_qps = len(few) / t_nx
    exact_seeds = seeds[: args.exact_queries]
    exact_kw = dict(
        tol=args.tol, dtype=args.exact_dtype, device=args.device, batch_size=args.exact_batch
    )
    personalized_pagerank(g, exact_seeds[:2], damping, **exact_kw)  # warm caches (and the GPU)
    exact, t_ex = timed(lambda: personalized_pagerank(g, exact_seeds, damping, **exact_kw))
    kept, t_kept = timed(lambda: personalized_pagerank(g, exact_seeds, damping, topk=k, **exact_kw))
    kept_nodes, _ = kept.topk(k)
    # the kept top-k against the dense result's top-k, ties at the cut counted as for the push
    kept_same = float(
        np.mean(
            [
                top_agreement(exact.dense[:, i], kept_nodes[i], k, tie_tol=1e-9)
                for i in range(len(exact_seeds))
            ]
        )
    )
    ex_err = max(float(np.abs(exact.dense[:, i] - ref[i]).max()) for i in range(len(sample)))
    # warm-up, as for the exact path: loads the compiled push and builds its relabelled graph
    personalized_pagerank(g, seeds[:2], damping, mode="local", eps=args.eps)
    local, t_lo = timed(
        lambda: personalized_pagerank(g, seeds, damping, mode="local", eps=args.eps)
    )
    lnodes, _ = local.topk(k)
    # agreement with the exact top-100 on every query that has an exact (or igraph) answer
    refs = [ref[i] for i in range(len(sample))]
    refs += [exact.dense[:, i] for i in range(len(sample), len(exact_seeds))]
    agree = [top_agreement(r, lnodes[i], k) for i, r in enumerate(refs)]
    agree_ties = [top_agreement(r, lnodes[i], k, tie_tol=1e-9) for i, r in enumerate(refs)]
    local_dense_err = 0.0
    for i in range(len(sample)):
        sel = local.query == i
        approx = np.zeros(g.n_nodes)
        approx[local.node[sel]] = local.score[sel]
        local_dense_err = max(local_dense_err, float(np.abs(approx - ref[i]).max()))
    return {
        "damping": damping,
        "igraph_qps": round(ig_qps, 2),
        "networkx_qps": None if nx_qps is None else round(nx_qps, 3),
        "exact_qps": round(len(exact_seeds) / t_ex, 2),
        "exact_ratio_vs_igraph": round(len(exact_seeds) / t_ex / ig_qps, 2),
        "exact_max_abs_err_vs_igraph": ex_err,
        "exact_iterations": exact.iterations,
        "exact_top100_qps": round(len(exact_seeds) / t_kept, 2),
        "exact_top100_ratio_vs_igraph": round(len(exact_seeds) / t_kept / ig_qps, 2),
        "exact_top100_same_as_dense": round(kept_same, 4),
        "local_qps": round(len(seeds) / t_lo, 2),
        "local_ratio_vs_igraph": round(len(seeds) / t_lo / ig_qps, 2),
        "local_top100_agreement_mean": round(float(np.mean(agree)), 4),
        "local_top100_agreement_min": round(float(np.min(agree)), 4),
        "local_top100_agreement_ties_mean": round(float(np.mean(agree_ties)), 4),
        "local_top100_agreement_ties_min": round(float(np.min(agree_ties)), 4),
        "local_max_abs_err_vs_igraph": local_dense_err,
        "local_l1_error_bound_max": float(local.error_bound.max()),
        "local_eps": args.eps,
        "local_pushes_max": local.iterations,
    }


def bench_paths(g, G_ig, rng, n) -> dict:
    """Unweighted shortest paths for 200 (source, target) pairs vs igraph."""
    pairs = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(200, 2))]
    mine, t_mine = timed(lambda: shortest_paths(g, pairs, weighted=False))
    ref, t_ig = timed(
        lambda: [G_ig.distances(source=s, target=t, mode="out")[0][0] for s, t in pairs]
    )
    agree = all(
        (p is None and np.isinf(r)) or (p is not None and p.length == r)
        for p, r in zip(mine, ref, strict=True)
    )
    return {
        "pairs": len(pairs),
        "ours_s": round(t_mine, 3),
        "igraph_s": round(t_ig, 3),
        "ratio": round(t_ig / t_mine, 2),
        "lengths_equal": agree,
    }


def bench_cosine(rng, nq: int, nc: int, device: str, dim: int = 384, k: int = 10) -> dict:
    """Blocked cosine top-k vs numpy brute force (full score matrix, argpartition)."""
    q = rng.normal(size=(nq, dim)).astype(np.float32)
    c = rng.normal(size=(nc, dim)).astype(np.float32)
    cosine_topk(q[:8], c[:1000], k, device=device)  # warm-up (loads the GPU kernels)
    (scores, ids), t_mine = timed(lambda: cosine_topk(q, c, k, device=device))

    def brute():
        qn = q / np.linalg.norm(q, axis=1, keepdims=True)
        cn = c / np.linalg.norm(c, axis=1, keepdims=True)
        s = qn @ cn.T
        part = np.argpartition(-s, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(s, part, axis=1), axis=1)
        return np.take_along_axis(part, order, axis=1)

    ref, t_np = timed(brute)
    return {
        "queries": nq,
        "candidates": nc,
        "dim": dim,
        "ours_s": round(t_mine, 3),
        "numpy_s": round(t_np, 3),
        "ratio": round(t_np / t_mine, 2),
        "top10_equal": float((ids == ref).mean()),
    }


def device_name(device: str) -> str:
    """The device's name as torch reports it (the CPU's 'cpu')."""
    if device == "cpu":
        return "cpu"
    import torch

    return torch.cuda.get_device_name(torch.device(device))


def main() -> None:
    """Run every kernel benchmark and print a table and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--damping", default="0.5,0.85")
    ap.add_argument(
        "--eps",
        type=float,
        default=1e-7,
        help="local push residual threshold (the library default)",
    )
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--exact-queries", type=int, default=256)
    ap.add_argument("--exact-dtype", default="mixed", choices=["float32", "float64", "mixed"])
    ap.add_argument(
        "--exact-batch",
        type=int,
        default=None,
        help="queries per exact PPR block (default: 16 on the CPU, 1,024 on a GPU)",
    )
    ap.add_argument("--device", default="cpu", help="exact PPR and cosine top-k: cpu or cuda")
    ap.add_argument("--igraph-sample", type=int, default=40)
    ap.add_argument("--networkx-sample", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    src, dst = power_law_graph(args.nodes, args.edges, args.seed)
    g = CSRGraph.from_edges(src, dst, n_nodes=args.nodes)
    G_ig = ig.Graph(n=args.nodes, edges=np.stack([src, dst], 1).tolist(), directed=True)
    G_nx = None
    if args.networkx_sample:
        G_nx = nx.DiGraph()
        G_nx.add_nodes_from(range(args.nodes))
        G_nx.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    seeds = [
        rng.choice(args.nodes, int(rng.integers(1, 6)), replace=False).tolist()
        for _ in range(args.queries)
    ]
    result = {
        "graph": {"nodes": args.nodes, "edges": int(src.size), "queries": args.queries},
        "device": device_name(args.device),
        "exact_batch": args.exact_batch,
        "ppr": [],
    }
    for d in (float(x) for x in args.damping.split(",")):
        result["ppr"].append(bench_ppr(g, G_ig, G_nx, seeds, d, args))
    result["paths"] = bench_paths(g, G_ig, rng, args.nodes)
    result["cosine"] = bench_cosine(rng, 2000, 50_000, args.device)

    print(f"graph: {args.nodes} nodes, {src.size} edges, {args.queries} queries of 1-5 seeds")
    print(f"exact PPR and cosine top-k on: {result['device']}")
    print(
        f"{'PPR':<26}{'damping':>8}{'q/s':>10}{'x igraph':>10}{'top100':>8}{'w/ ties':>8}{'max err':>10}"
    )
    for r in result["ppr"]:
        d = r["damping"]
        rows = [("igraph (per query)", r["igraph_qps"], 1.0, "", "", "")]
        if r["networkx_qps"] is not None:
            nx_ratio = round(r["networkx_qps"] / r["igraph_qps"], 3)
            rows.append(("networkx (per query)", r["networkx_qps"], nx_ratio, "", "", ""))
        rows.append(
            (
                f"exact batched ({args.exact_dtype})",
                r["exact_qps"],
                r["exact_ratio_vs_igraph"],
                1.0,
                1.0,
                f"{r['exact_max_abs_err_vs_igraph']:.1e}",
            )
        )
        rows.append(
            (
                "exact, top-100 kept",
                r["exact_top100_qps"],
                r["exact_top100_ratio_vs_igraph"],
                r["exact_top100_same_as_dense"],
                "",
                "",
            )
        )
        rows.append(
            (
                f"local push (eps {args.eps:g})",
                r["local_qps"],
                r["local_ratio_vs_igraph"],
                r["local_top100_agreement_mean"],
                r["local_top100_agreement_ties_mean"],
                f"{r['local_max_abs_err_vs_igraph']:.1e}",
            )
        )
        for name, qps, ratio, agree, ties, err in rows:
            print(f"{name:<26}{d:>8}{qps:>10}{ratio:>10}{agree:>8}{ties:>8}{err:>10}")
    p = result["paths"]
    print(
        f"shortest paths ({p['pairs']} pairs, BFS): ours {p['ours_s']} s, igraph {p['igraph_s']} s, ratio {p['ratio']}x, lengths equal: {p['lengths_equal']}"
    )
    c = result["cosine"]
    print(
        f"cosine top-10 ({c['queries']} x {c['candidates']} x {c['dim']}): ours {c['ours_s']} s, numpy {c['numpy_s']} s, ratio {c['ratio']}x, ids equal {c['top10_equal']:.4f}"
    )
    write_result("kernels", {"bench": "kernels", **result})


if __name__ == "__main__":
    main()
