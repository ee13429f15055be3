"""The int8 embedder's calibration steps one by one: MiniLM exported to fp32 ONNX, then
rewritten per token with weights rounded to nearest, with GPTQ rounding, and with channel
smoothing and GPTQ (what `embedder.backend: onnx-int8` builds); cosine of each to
sentence-transformers fp32 on train passages, and chunks per second (best of three rounds,
variants interleaved, one process).

    .venv/bin/python -m bench.int8_variants [--set musique] [--n 300]

Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import write_result
from bench.retrieval import DATA
from graphrag_engine.models import onnx_embed
from graphrag_engine.models.embed import SentenceTransformerEmbedder
from graphrag_engine.models.onnx_int8 import activation_stats, quantize_per_token
from graphrag_engine.names import titled_chunk


def main() -> None:
    """Build the three int8 variants from one fp32 export and compare them."""
    import onnx
    import onnxruntime as ort
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="musique")
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    corpus = [json.loads(x) for x in (DATA / f"{args.set}_train_corpus.jsonl").open()]
    picked = np.random.default_rng(0).choice(len(corpus), args.n, replace=False)
    texts = [titled_chunk(corpus[i].get("title"), corpus[i]["text"]) for i in picked]
    fp32 = SentenceTransformerEmbedder()
    ref = fp32.encode(texts)
    embedder = onnx_embed.OnnxInt8Embedder()  # its tokenizer and pooling run every variant
    with tempfile.TemporaryDirectory() as work:
        model = onnx.load(str(onnx_embed.export_fp32(fp32.model, Path(work) / "fp32.onnx")))
    feeds = onnx_embed.calibration_feeds(embedder.tokenizer, embedder.max_len)
    stats = activation_stats(model, feeds)
    variants = {
        "rounded to nearest": quantize_per_token(copy.deepcopy(model), None),
        "GPTQ": quantize_per_token(copy.deepcopy(model), stats, smoothing=None),
        "smoothing + GPTQ (onnx-int8)": quantize_per_token(copy.deepcopy(model), stats),
    }
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    sessions = {
        k: ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
        for k, m in variants.items()
    }
    best, cosine = dict.fromkeys(sessions, np.inf), {}
    for _ in range(3):
        for name, session in sessions.items():
            embedder.session = session
            embedder.encode(texts[:16])
            started = time.perf_counter()
            vectors = embedder.encode(texts)
            best[name] = min(best[name], time.perf_counter() - started)
            c = (vectors * ref).sum(1)
            cosine[name] = (round(float(c.mean()), 5), round(float(c.min()), 4))
    first = next(iter(best))
    print(f"load average {os.getloadavg()[0]:.2f}; {args.n} {args.set} train passages")
    print(f"{'int8 variant':<30}{'cosine mean / min':>19}{'chunks/s':>10}{'x nearest':>11}")
    rows = []
    for name in sessions:
        rate = args.n / best[name]
        rows.append({"variant": name, "cosine": cosine[name], "chunks_per_s": round(rate, 1)})
        print(
            f"{name:<30}{cosine[name][0]:>11.5f} / {cosine[name][1]:.4f}{rate:>10.1f}"
            f"{best[first] / best[name]:>11.3f}"
        )
    write_result("int8_variants", {"bench": "int8_variants", "set": args.set, "rows": rows})


if __name__ == "__main__":
    main()
