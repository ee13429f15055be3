"""Texts per forward pass on the CPU: embedding rate of fixed batch sizes and of the engine's
token-budget batches (`models.embedder.batch_size` unset: 2,048 padded tokens a pass), per text
kind of an LLM-free index (chunks, units, entities), with the engine's fp32 MiniLM and its int8
ONNX Runtime MiniLM, and the ratio to 64 texts a pass (the default before), all in one run.

    .venv/bin/python -m bench.embed_batch --index DIR [--sample 600] [--sizes 8,16,32,64]

DIR is an LLM-free MuSiQue index (see bench/embed_floor.py). Each kind's texts are rebuilt as
the index stage embeds them; a seeded sample is embedded at each size, smallest first, after one
warm-up pass. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import write_result
from bench.embed_floor import index_texts
from graphrag_engine.errors import ConfigError
from graphrag_engine.models.embed import SentenceTransformerEmbedder
from graphrag_engine.models.onnx_embed import OnnxInt8Embedder

KINDS = ("chunks", "units", "entities")


def main() -> None:
    """Embed each kind's sample at each batch size with each path; print rates and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True, type=Path)
    ap.add_argument("--sample", type=int, default=600)
    ap.add_argument("--sizes", default="8,16,32,64")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sizes = [int(s) for s in args.sizes.split(",")]
    if 64 not in sizes:
        sizes.append(64)  # the reference every ratio is taken against
    texts = index_texts(args.index)
    rng = np.random.default_rng(0)
    samples = {
        k: [texts[k][i] for i in rng.choice(len(texts[k]), args.sample, replace=False)]
        for k in KINDS
    }
    paths: dict[str, object] = {"fp32": SentenceTransformerEmbedder()}
    try:
        paths["int8"] = OnnxInt8Embedder()
    except ConfigError as err:
        print(f"int8 ONNX path skipped: {err}", file=sys.stderr)
    rows = []
    for name, model in paths.items():
        for kind, sample in samples.items():
            model.batch_size = 64
            model.encode(sample[:64])  # warm
            rate = {}
            for size in [*sorted(sizes), None]:
                model.batch_size = size
                started = time.perf_counter()
                model.encode(sample)
                rate[size] = len(sample) / (time.perf_counter() - started)
            rows.append(
                {
                    "path": name,
                    "kind": kind,
                    "texts_per_s": {str(s or "tokens"): round(r, 1) for s, r in rate.items()},
                    "x_64": {str(s or "tokens"): round(r / rate[64], 2) for s, r in rate.items()},
                }
            )
    print(f"load average {os.getloadavg()[0]:.2f}; {args.sample} texts per kind")
    columns = [*map(str, sorted(sizes)), "tokens"]
    print(f"{'path':<6}{'kind':<10}" + "".join(f"{c + ' /s (x64)':>20}" for c in columns))
    for r in rows:
        cells = "".join("{:>20}".format(f"{r['texts_per_s'][c]} ({r['x_64'][c]})") for c in columns)
        print(f"{r['path']:<6}{r['kind']:<10}{cells}")
    write_result("embed_batch", {"bench": "embed_batch", "sample": args.sample, "rows": rows})


if __name__ == "__main__":
    main()
