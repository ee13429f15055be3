"""vLLM on a Ray cluster through Ray's own batch LLM integration (`ray.data.llm`), used by the
ray executor for `llm.backend: vllm` where both are installed (GPU path, not exercised in CI).

A stage's prompts become one dataset: Ray's processor applies the model's chat template,
tokenizes, and answers with `workers` vLLM engines (each on `tensor_parallel_size` GPUs,
continuous batching inside); answers stream back block by block, so the LLM front caches and
counts them as they come. Each row keeps its position, so answers return in input order. A row
vLLM fails on comes back as a failed Completion (the front re-asks or records it), never as an
answer. The engines are started per stage call: the price of Ray Data's pools, small beside a
stage of thousands of prompts (the ModelWorker path keeps one engine per actor instead).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from engine.models.base import Completion, Done, GenParams, Prompt, as_messages
from engine.models.vllm_llm import prompt_ids

ANSWER_COLUMNS = ("pos", "generated_text", "num_input_tokens", "num_generated_tokens")
"""What an answered row keeps (a failed row keeps everything, `__inference_error__` included)."""


def ray_data_llm_available() -> bool:
    """Whether Ray's batch LLM integration and vLLM are both importable here."""
    return all(importlib.util.find_spec(m) is not None for m in ("ray", "vllm")) and (
        importlib.util.find_spec("ray.data.llm") is not None
    )


def sampling_params(params: GenParams, constrained: bool = True) -> dict[str, Any]:
    """vLLM sampling parameters of a stage, as Ray's vLLM stage takes them (a plain dict; the
    stage's JSON schema as `structured_outputs` when it has one and constraint is on)."""
    out = params.sampling()
    if constrained and params.json_schema is not None:
        out["structured_outputs"] = {"json": params.json_schema}
    return out


def prompt_rows(prompts: list[Prompt]) -> list[dict[str, Any]]:
    """One dataset row per prompt: its position and its chat messages."""
    return [{"pos": i, "messages": as_messages(p)} for i, p in enumerate(prompts)]


def completion_of(row: dict[str, Any], schema_given: bool) -> tuple[int, Completion]:
    """(position, Completion) of one answered row; a row vLLM failed on is a failed Completion."""
    error = row.get("__inference_error__") or None
    decoding = "schema" if schema_given and error is None else None
    return int(row["pos"]), Completion(
        "" if error else str(row.get("generated_text") or ""),
        int(row.get("num_input_tokens") or 0),
        int(row.get("num_generated_tokens") or 0),
        error=error,
        decoding=decoding,
    )


class RayDataVLLM:
    """An LLM backend answering each batch with a `ray.data.llm` vLLM processor."""

    def __init__(self, llm_cfg: dict, workers: int) -> None:
        from transformers import AutoTokenizer  # the driver counts prompt tokens itself

        self.cfg, self.workers = llm_cfg, workers
        self.model_id = f"vllm:{llm_cfg['model']}"  # VLLMBackend's: the caches are shared
        self.tokenizer = AutoTokenizer.from_pretrained(llm_cfg["model"], local_files_only=True)

    def count_tokens(self, prompts: list[Prompt]) -> list[int]:
        """Prompt tokens after the chat template."""
        return [len(prompt_ids(self.tokenizer, p)) for p in prompts]

    def generate(
        self, prompts: list[Prompt], params: GenParams, on_done: Done | None = None
    ) -> list[Completion]:
        """Answer the prompts on the cluster; each finished block reaches `on_done` at once."""
        import ray.data  # ray is an optional extra
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig

        cfg = self.cfg
        config = vLLMEngineProcessorConfig(
            model_source=cfg["model"],
            engine_kwargs={
                "tensor_parallel_size": cfg["tensor_parallel_size"],
                "gpu_memory_utilization": cfg["gpu_memory_utilization"],
            },
            concurrency=max(1, self.workers),
            batch_size=max(1, cfg["batch_size"]),
            should_continue_on_error=True,  # a failed row is recorded, the stage goes on
        )
        sampling = sampling_params(params, cfg.get("constrained", True))
        processor = build_processor(
            config,
            preprocess=lambda row: {**row, "sampling_params": sampling},
            postprocess=lambda row: {k: row.get(k) for k in ANSWER_COLUMNS},
        )
        schema_given = "structured_outputs" in sampling
        done: list[Completion | None] = [None] * len(prompts)
        answered = processor(ray.data.from_items(prompt_rows(prompts)))
        for batch in answered.iter_batches(batch_size=None, batch_format="pandas"):
            pairs = [completion_of(row, schema_given) for row in batch.to_dict("records")]
            for pos, completion in pairs:
                done[pos] = completion
            if on_done is not None:
                on_done([p for p, _ in pairs], [c for _, c in pairs])
        missing = [i for i, c in enumerate(done) if c is None]
        if missing:
            raise RuntimeError(f"ray.data.llm finished without answering {len(missing)} prompts")
        return [c for c in done if c is not None]
