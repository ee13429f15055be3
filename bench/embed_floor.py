"""The embedding floor of an LLM-free index: how many seconds its texts cost the embedder, per
kind (chunks, units, entities, relations), with the engine's fp32 MiniLM, its fp32 ONNX Runtime
MiniLM (embedder.backend: onnx) and its int8 ONNX Runtime MiniLM (embedder.backend: onnx-int8),
both built here from the packaged weights; and what the machine's matrix product peak allows at
best.

    .venv/bin/python -m bench.embed_floor --index DIR [--sample 800]

DIR is an LLM-free index of MuSiQue (`graphrag-engine index ../shared/data/musique_corpus.jsonl
--out DIR --config C`, C holding `graph: {alpha: 0.0}`). Each kind's texts are rebuilt exactly
as the index stage embeds them; a seeded sample of `--sample` texts per kind is embedded with
each path and the rate extrapolated to the kind's count. The FLOP count is the encoder's dense
layers and attention at each text's real token length (what padding to actual lengths leaves).
The ONNX paths need the `onnx` extra; without it their columns are skipped. It
prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import write_result
from graphrag_engine.errors import ConfigError
from graphrag_engine.models.embed import SentenceTransformerEmbedder
from graphrag_engine.models.onnx_embed import FP32, SCHEME, OnnxEmbedder
from graphrag_engine.names import entity_text, relation_text, titled_chunk
from graphrag_engine.store import open_index

LAYERS, WIDTH, FFN = 6, 384, 1536  # all-MiniLM-L6-v2


def index_texts(index_dir: Path) -> dict[str, list[str]]:
    """The texts each vector table of the index was embedded from, as graph_stages forms them."""
    ix = open_index(index_dir)
    title = dict(
        zip(
            *(
                ix.table("documents", ["doc_id", "title"]).column(c).to_pylist()
                for c in ("doc_id", "title")
            ),
            strict=True,
        )
    )
    chunks = ix.table("chunks", ["doc_id", "text"]).to_pylist()
    entities = ix.table("entities", ["entity_id", "name", "description"]).to_pylist()
    name_of = {e["entity_id"]: e["name"] for e in entities}
    relations = ix.table("relations", ["src", "dst", "description"]).to_pylist()
    return {
        "chunks": [titled_chunk(title[c["doc_id"]], c["text"]) for c in chunks],
        "units": ix.table("units", ["text"]).column("text").to_pylist(),
        "entities": [entity_text(e["name"], e["description"]) for e in entities],
        "relations": [
            relation_text(name_of[r["src"]], name_of[r["dst"]], r["description"]) for r in relations
        ],
    }


def encoder_flops(n_tokens: np.ndarray) -> float:
    """Multiply-adds x 2 of the encoder over texts of these token lengths (dense + attention)."""
    dense = 2 * LAYERS * (4 * WIDTH * WIDTH + 2 * WIDTH * FFN) * n_tokens
    attention = 2 * LAYERS * 2 * WIDTH * n_tokens.astype(np.float64) ** 2
    return float((dense + attention).sum())


def matmul_gflops(size: int = 2048, reps: int = 8) -> float:
    """This machine's float32 matrix product rate through torch (the dense layers' ceiling)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    started = time.perf_counter()
    for _ in range(reps):
        a @ b
    return reps * 2 * size**3 / (time.perf_counter() - started) / 1e9


def main() -> None:
    """Embed a sample of each kind with each path; print seconds per kind at full count."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True, type=Path)
    ap.add_argument("--sample", type=int, default=800)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    kinds = index_texts(args.index)
    st = SentenceTransformerEmbedder()
    rng = np.random.default_rng(0)
    paths: dict[str, object] = {"fp32": st}
    try:  # the engine's onnx and onnx-int8 backends, built here once
        paths["onnx32"] = OnnxEmbedder(scheme=FP32)
        paths["int8"] = OnnxEmbedder(scheme=SCHEME)
    except ConfigError as err:
        print(f"ONNX paths skipped: {err}", file=sys.stderr)
    peak = matmul_gflops()
    rows = []
    for kind, texts in kinds.items():
        pick = rng.choice(len(texts), min(args.sample, len(texts)), replace=False)
        sample = [texts[i] for i in pick]
        lengths = np.array(
            [min(len(ids), st.model.max_seq_length) for ids in st.tokenizer(sample)["input_ids"]]
        )
        flops = encoder_flops(lengths) * len(texts) / len(sample)
        row = {
            "kind": kind,
            "texts": len(texts),
            "mean_tokens": round(float(lengths.mean()), 1),
            "tflop": round(flops / 1e12, 2),
        }
        reference = None
        for name, model in paths.items():
            model.encode(sample[:16])  # warm
            started = time.perf_counter()
            vecs = model.encode(sample)
            seconds = (time.perf_counter() - started) * len(texts) / len(sample)
            row[f"{name}_s"] = round(seconds, 1)
            if reference is None:
                reference = vecs
            else:
                row[f"{name}_cosine_min"] = round(float((vecs * reference).sum(1).min()), 6)
        row["peak_s"] = round(flops / (peak * 1e9), 1)
        rows.append(row)
    names = list(paths)
    total = {
        k: round(sum(r[k] for r in rows if k in r), 1)
        for k in [f"{n}_s" for n in names] + ["peak_s", "tflop"]
    }
    print(
        f"matrix product peak (torch, float32): {peak:.0f} GFLOP/s; load average {os.getloadavg()[0]:.2f}"
    )
    others = names[1:]
    print(
        f"{'kind':<10}{'texts':>8}{'tokens':>8}{'TFLOP':>7}"
        + "".join(f"{n + ' s':>9}" for n in names)
        + "".join(f"{n + ' cos min':>15}" for n in others)
        + f"{'at peak s':>10}"
    )
    for r in rows + [{"kind": "all", "texts": "", "mean_tokens": "", **total}]:
        print(
            f"{r['kind']:<10}{r['texts']:>8}{r['mean_tokens']:>8}{r['tflop']:>7}"
            + "".join(f"{r[n + '_s']:>9}" for n in names)
            + "".join(f"{r.get(n + '_cosine_min', ''):>15}" for n in others)
            + f"{r['peak_s']:>10}"
        )
    write_result(
        "embed_floor",
        {"bench": "embed_floor", "gflops_peak": round(peak, 1), "rows": rows, "total": total},
    )


if __name__ == "__main__":
    main()
