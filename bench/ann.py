"""Approximate vs exact vector search (issue 22 item 6): faiss HNSW and IVF against the engine's
exact blocked cosine top-k, on real MiniLM vectors pooled from built indexes and on a table
filled up to ROWS with perturbed copies of them; real questions as queries.

    .venv/bin/python -m bench.ann --index IDX [IDX ...] --questions Q.jsonl [Q2.jsonl ...]
        [--rows 1000000]
        [--queries 1000] [--k 10] [--threads 1]

The pool is every vector table (chunks, units, entities, relations) of the given indexes. A
table larger than the pool is the pool plus copies of random pool rows with Gaussian noise
(each copy's cosine to its source about 0.8), renormalized: synthetic beyond the pool, and said
so in the output. Queries are the first QUERIES questions, embedded with MiniLM. Printed per
table size: build seconds, q/s, the ratio to exact search in the same run, recall@k against
exact, and the index's size on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import write_result
from graphrag_engine.config import EmbedderConfig
from graphrag_engine.kernels.ann import AnnIndex, AnnParams
from graphrag_engine.kernels.similarity import cosine_topk, l2_normalize
from graphrag_engine.models import make_embedder
from graphrag_engine.store.index_store import Index

TABLES = ("chunk_vectors", "unit_vectors", "entity_vectors", "relation_vectors")
COPY_COSINE = 0.8


def pool(indexes: list[str]) -> np.ndarray:
    """Every vector table of the indexes, stacked."""
    parts = []
    for root in indexes:
        index = Index(root)
        parts += [np.asarray(index.vectors(t)) for t in TABLES if index.has(t)]
    return l2_normalize(np.concatenate(parts))


def fill(base: np.ndarray, rows: int, seed: int = 0) -> np.ndarray:
    """`base` plus noisy copies of its rows up to `rows` rows."""
    if rows <= len(base):
        return base[:rows]
    rng = np.random.default_rng(seed)
    extra = rows - len(base)
    out = np.empty((rows, base.shape[1]), np.float32)
    out[: len(base)] = base
    sigma = np.sqrt((1 / COPY_COSINE**2 - 1) / base.shape[1])  # |noise| = tan(arccos(0.8))
    for lo in range(0, extra, 100_000):
        n = min(100_000, extra - lo)
        src = base[rng.integers(0, len(base), n)]
        out[len(base) + lo : len(base) + lo + n] = l2_normalize(
            src + rng.normal(0, sigma, src.shape).astype(np.float32)
        )
    return out


def recall(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of the exact top-k that the search found."""
    return float(
        np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact, strict=True)])
    )


def measure(table: np.ndarray, queries: np.ndarray, k: int, settings: list[AnnParams]) -> list:
    """Exact search, then each ANN setting: (name, build s, q/s, x exact, recall, MB)."""
    t0 = time.perf_counter()
    _, exact = cosine_topk(queries, table, k, normalized=True)
    exact_s = time.perf_counter() - t0
    rows = [
        (
            "exact (blocked cosine top-k)",
            0.0,
            len(queries) / exact_s,
            1.0,
            1.0,
            table.nbytes / 2**20,
        )
    ]
    built: dict[str, tuple[AnnIndex, float, float]] = {}  # one build per kind and settings
    for p in settings:
        key = json.dumps(p.build_key(), sort_keys=True)
        if key not in built:
            t0 = time.perf_counter()
            ann = AnnIndex.build(table, p)
            seconds = time.perf_counter() - t0
            with tempfile.TemporaryDirectory() as tmp:
                ann.save(Path(tmp) / "a.faiss")
                size = os.path.getsize(Path(tmp) / "a.faiss") / 2**20
            built[key] = (ann, seconds, size)
        ann, build, mb = built[key]
        ann = AnnIndex(ann._index, p)  # the same build, searched with p's settings
        t0 = time.perf_counter()
        _, ids = ann.search(queries, k, normalized=True)
        search_s = time.perf_counter() - t0
        name = (
            f"hnsw M={p.hnsw_m} efC={p.hnsw_ef_construction} ef={p.hnsw_ef_search}"
            if p.kind == "hnsw"
            else f"ivf lists={'4*sqrt(n)' if not p.ivf_lists else p.ivf_lists} probe={p.ivf_probe}"
        )
        rows.append(
            (name, build, len(queries) / search_s, exact_s / search_s, recall(ids, exact), mb)
        )
    return rows


def main() -> None:
    """Parse arguments, measure each table size, print one table per size."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", nargs="+", required=True)
    ap.add_argument("--questions", nargs="+", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import faiss
    import torch

    faiss.omp_set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    base = pool(args.index)
    texts = [json.loads(x)["question"] for f in args.questions for x in open(f)][: args.queries]
    queries = l2_normalize(make_embedder(EmbedderConfig()).encode(texts))
    settings = [
        AnnParams("hnsw", hnsw_ef_search=64),
        AnnParams("hnsw"),
        AnnParams("ivf", ivf_probe=8),
        AnnParams("ivf", ivf_probe=32),
    ]
    print(f"pool: {len(base):,} real MiniLM vectors from {len(args.index)} indexes; "
          f"{len(queries)} real questions; k={args.k}; {args.threads} thread(s); "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    tables = []
    for rows in (len(base), args.rows):
        table = fill(base, rows)
        synthetic = max(0, rows - len(base))
        print(f"\n## {rows:,} vectors ({synthetic:,} of them noisy copies, cosine {COPY_COSINE} "
              "to their source)" if synthetic else f"\n## {rows:,} vectors (all real)")  # fmt: skip
        print(f"| search | build s | q/s | x exact | recall@{args.k} | MB |")
        print("| --- | --- | --- | --- | --- | --- |")
        measured = []
        for name, build, qps, ratio, rec, mb in measure(table, queries, args.k, settings):
            print(f"| {name} | {build:.1f} | {qps:,.0f} | {ratio:.1f} | {rec:.3f} | {mb:,.0f} |")
            sys.stdout.flush()
            measured.append(
                {"search": name, "build_s": build, "q_per_s": qps, "x_exact": ratio,
                 "recall": rec, "mb": mb}
            )  # fmt: skip
        tables.append({"vectors": rows, "noisy_copies": synthetic, "rows": measured})
    write_result("ann", {"queries": len(queries), "k": args.k, "threads": args.threads,
                         "tables": tables})  # fmt: skip


if __name__ == "__main__":
    main()
