"""Model throughput: batched vs one-at-a-time, measured in one run on this machine.

* transformers backend (packaged SmolLM2-135M GGUF): batch_size 1 vs 8 over the same prompts;
* llama.cpp OpenAI-compatible server (started here on loopback): concurrency 1 vs 8;
* embedder (packaged all-MiniLM-L6-v2): one text per call vs batches of 64.

    .venv/bin/python -m bench.models [--prompts 16] [--max-tokens 32]

Prints a table and one JSON line. Greedy decoding; the response cache is off.
"""

from __future__ import annotations

import argparse
import time

from bench.common import write_result
from graphrag_engine.models import GenParams
from graphrag_engine.models.embed import SentenceTransformerEmbedder
from graphrag_engine.models.llama_server import LlamaServer
from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM
from graphrag_engine.models.transformers_llm import TransformersLLM

TOPICS = [
    "harbours",
    "lighthouses",
    "railways",
    "operas",
    "bridges",
    "storms",
    "silver trophies",
    "salt pans",
    "ferries",
    "museums",
    "orchestras",
    "banks",
    "regattas",
    "islands",
    "painters",
    "architects",
]


def prompts(n: int) -> list[str]:
    """n short instruction prompts of similar length."""
    return [
        f"Write two sentences about {TOPICS[i % len(TOPICS)]} on a small island." for i in range(n)
    ]


def run_llm(backend, batch: list[str], params: GenParams) -> dict:
    """Generate, return seconds and completion tokens per second."""
    t0 = time.perf_counter()
    out = backend.generate(batch, params)
    seconds = time.perf_counter() - t0
    if any(c.error for c in out):
        raise RuntimeError(out[0].error)
    tokens = sum(c.completion_tokens for c in out)
    return {
        "seconds": round(seconds, 2),
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 2),
    }


def main() -> None:
    """Run all three comparisons."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--texts", type=int, default=2000)
    args = ap.parse_args()
    batch = prompts(args.prompts)
    params = GenParams(max_tokens=args.max_tokens)
    result: dict = {}

    tf = TransformersLLM(batch_size=1)
    tf.generate(batch[:1], GenParams(max_tokens=4))  # warm-up
    single = run_llm(tf, batch, params)
    tf.batch_size = 8
    batched = run_llm(tf, batch, params)
    result["transformers"] = {
        "one_at_a_time": single,
        "batched_8": batched,
        "ratio": round(batched["tokens_per_s"] / single["tokens_per_s"], 2),
    }
    del tf

    with LlamaServer() as server:
        one = OpenAICompatLLM(server.alias, HTTPSettings(base_url=server.url, concurrency=1))
        one.generate(batch[:1], GenParams(max_tokens=4))
        single = run_llm(one, batch, params)
        many = OpenAICompatLLM(server.alias, HTTPSettings(base_url=server.url, concurrency=8))
        concurrent = run_llm(many, batch, params)
    result["llama_server"] = {
        "concurrency_1": single,
        "concurrency_8": concurrent,
        "ratio": round(concurrent["tokens_per_s"] / single["tokens_per_s"], 2),
    }

    emb = SentenceTransformerEmbedder(batch_size=64)
    texts = [f"{p} Number {i}." for i, p in enumerate(prompts(args.texts))]
    emb.encode(texts[:8])
    t0 = time.perf_counter()
    emb.encode(texts)
    batched_s = time.perf_counter() - t0
    sample = texts[:200]
    t0 = time.perf_counter()
    for t in sample:
        emb.encode([t])
    single_rate = len(sample) / (time.perf_counter() - t0)
    result["embedder"] = {
        "batched_texts_per_s": round(len(texts) / batched_s, 1),
        "one_at_a_time_texts_per_s": round(single_rate, 1),
        "ratio": round(len(texts) / batched_s / single_rate, 2),
    }

    t = result["transformers"]
    s = result["llama_server"]
    e = result["embedder"]
    print(f"{'what':<44}{'one at a time':>16}{'batched':>12}{'ratio':>8}")
    print(
        f"{'transformers SmolLM2 (completion tok/s)':<44}{t['one_at_a_time']['tokens_per_s']:>16}{t['batched_8']['tokens_per_s']:>12}{t['ratio']:>8}"
    )
    print(
        f"{'llama.cpp server, 8 concurrent (tok/s)':<44}{s['concurrency_1']['tokens_per_s']:>16}{s['concurrency_8']['tokens_per_s']:>12}{s['ratio']:>8}"
    )
    print(
        f"{'MiniLM embeddings (texts/s)':<44}{e['one_at_a_time_texts_per_s']:>16}{e['batched_texts_per_s']:>12}{e['ratio']:>8}"
    )
    write_result(
        "models",
        {"bench": "models", "prompts": args.prompts, "max_tokens": args.max_tokens, **result},
    )


if __name__ == "__main__":
    main()
