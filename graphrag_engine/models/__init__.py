"""Model layer: batched LLM backends, response cache, token accounting, embedders, rerankers.

Build them from config with `make_llm`, `make_embedder` and `make_reranker`.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

from graphrag_engine.config import EmbedderConfig, LLMConfig, RerankerConfig
from graphrag_engine.errors import ConfigError
from graphrag_engine.models.base import (
    Completion,
    GenParams,
    LLMError,
    LLMRequiredError,
    Usage,
    UsageLedger,
)
from graphrag_engine.models.cache import ResponseCache
from graphrag_engine.models.embed import (
    BGEM3Embedder,
    Embedder,
    PrefixedEmbedder,
    SentenceTransformerEmbedder,
)
from graphrag_engine.models.llm import LLM, NoLLM
from graphrag_engine.models.rerank import BiEncoderReranker, CrossEncoderReranker, Scorer

__all__ = [
    "LLM",
    "Completion",
    "Embedder",
    "GenParams",
    "LLMError",
    "LLMRequiredError",
    "NoLLM",
    "Scorer",
    "ResponseCache",
    "Usage",
    "UsageLedger",
    "llm_yaml",
    "make_embedder",
    "make_llm",
    "make_reranker",
]


def llm_yaml(**keys: object) -> str:
    """A config file's `models.llm` section with these settings, each a key of `LLMConfig`."""
    known = {f.name for f in dataclasses.fields(LLMConfig)}
    unknown = sorted(set(keys) - known)
    if unknown:
        raise ConfigError(f"models.llm has no key {unknown[0]!r}; its keys: {sorted(known)}")
    return "models:\n  llm:\n" + "".join(f"    {k}: {v}\n" for k, v in keys.items())


def _http(cfg) -> object:
    from graphrag_engine.models.openai_llm import HTTPSettings  # httpx only for servers

    return HTTPSettings(
        base_url=cfg.base_url,
        api_key_env=cfg.api_key_env,
        concurrency=getattr(cfg, "concurrency", 8),
        connect_timeout_s=getattr(cfg, "connect_timeout_s", 5.0),
        read_timeout_s=getattr(cfg, "read_timeout_s", 120.0),
        max_retries=getattr(cfg, "max_retries", 5),
    )


def make_llm(
    cfg: LLMConfig,
    default_cache: str | Path | None = None,
    dry_run: bool = False,
    backend=None,
    ledger: UsageLedger | None = None,
) -> LLM:
    """The LLM front for a config: backend + SQLite response cache + accounting.

    `backend` overrides the one the config names (e.g. engines living in Ray actors); `ledger`
    lets several LLMs of one run account into the same usage table.
    """
    backend = backend if backend is not None else make_backend(cfg)
    cache_path = cfg.cache or default_cache
    cache = ResponseCache(cache_path) if cache_path and cfg.backend != "none" else None
    return LLM(
        backend,
        cache=cache,
        ledger=ledger,
        dry_run=dry_run,
        flush_every=cfg.flush_every,
        max_failed_share=cfg.max_failed_share,
    )


def make_backend(cfg: LLMConfig):
    """The bare backend a config names (no cache, no accounting)."""
    if cfg.backend == "none":
        return NoLLM()
    if cfg.backend == "transformers":
        from graphrag_engine.models.transformers_llm import (
            TransformersLLM,  # loads torch/transformers
        )

        return TransformersLLM(
            cfg.model,
            cfg.gguf_file,
            cfg.device,
            cfg.batch_size,
            constrained=cfg.constrained,
            dtype=cfg.dtype,
        )
    if cfg.backend == "openai":
        from graphrag_engine.models.openai_llm import OpenAICompatLLM  # httpx only for servers

        if not cfg.model:
            raise ConfigError("llm.model: the openai backend needs the server's model name")
        return OpenAICompatLLM(cfg.model, _http(cfg))
    if cfg.backend == "vllm":
        from graphrag_engine.models.vllm_llm import VLLMBackend  # vllm: optional GPU extra

        if not cfg.model:
            raise ConfigError("llm.model: the vllm backend needs a local model folder")
        return VLLMBackend(
            cfg.model,
            cfg.tensor_parallel_size,
            cfg.gpu_memory_utilization,
            constrained=cfg.constrained,
        )
    raise ConfigError(f"llm.backend: unknown backend {cfg.backend!r}")


def make_embedder(cfg: EmbedderConfig) -> Embedder:
    """The embedder of a config; local models are loaded once per process and shared."""
    if cfg.backend == "openai":
        from graphrag_engine.models.openai_llm import OpenAIEmbedder  # httpx only for servers

        embedder = OpenAIEmbedder(cfg.model, _http(cfg), cfg.batch_size or 64)
    else:
        embedder = _local_embedder(cfg.backend, cfg.model, cfg.device, cfg.batch_size)
    if cfg.query_prefix or cfg.passage_prefix:
        return PrefixedEmbedder(embedder, cfg.query_prefix, cfg.passage_prefix)
    return embedder


@lru_cache(maxsize=4)
def _local_embedder(backend: str, model: str, device: str, batch_size: int | None) -> Embedder:
    if backend == "bge-m3":
        return BGEM3Embedder(model, device, batch_size or 32)
    if backend in ("onnx", "onnx-int8"):
        from graphrag_engine.models.onnx_embed import (  # onnxruntime: optional extra
            BACKENDS,
            OnnxEmbedder,
        )

        if device != "cpu":
            raise ConfigError(f"embedder.backend {backend!r} runs on the CPU; set device: cpu")
        return OnnxEmbedder(model, batch_size, BACKENDS[backend])
    return SentenceTransformerEmbedder(model, device, batch_size)


def make_reranker(cfg: RerankerConfig, embedder: Embedder) -> Scorer:
    """The reranker of a config (bi-encoder reuses the embedder)."""
    if cfg.backend == "bi-encoder":
        return BiEncoderReranker(embedder)
    if not cfg.model:
        raise ConfigError(f"reranker.model: the {cfg.backend} reranker needs a local model folder")
    backend = "flag" if cfg.backend == "flag" else "sentence-transformers"
    return CrossEncoderReranker(cfg.model, backend, cfg.device, cfg.batch_size)
