"""LLM generation on a Ray cluster as Ray Data pipelines, used by the ray executor for the
in-process backends: vLLM through Ray's own batch LLM integration (`ray.data.llm`) where it and
vLLM are installed (GPU path, not exercised in CI), else the engine's own backend (transformers,
vLLM) in a pool of `GenerateBlocks` actors (graphrag_engine/exec/ray_data.py).

Either way a stage's prompts become one dataset answered by `workers` engines; answers stream
back block by block, so the LLM front caches and counts them as they come, and each row keeps
its position, so answers return in input order. For vLLM, Ray's processor applies the model's
chat template, tokenizes and answers (each engine on `tensor_parallel_size` GPUs, continuous
batching inside); a row vLLM fails on comes back as a failed Completion (the front re-asks or
records it), never as an answer. The engines are started per stage call (a stage's round or
re-ask): the price of Ray Data's pools, small beside a stage of thousands of prompts.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from graphrag_engine.config import LLMConfig
from graphrag_engine.exec.ray_data import (
    GenerateBlocks,
    by_position,
    parts_read,
    rows_to_part,
    stream_blocks,
)
from graphrag_engine.models import make_backend
from graphrag_engine.models.base import Completion, Done, GenParams, Prompt, as_messages
from graphrag_engine.models.vllm_llm import prompt_ids

ANSWER_COLUMNS = ("pos", "generated_text", "num_input_tokens", "num_generated_tokens")
"""What an answered row keeps (a failed row keeps everything, `__inference_error__` included)."""
ERROR_COLUMN = "__inference_error__"
"""Where Ray's processor says why a row failed."""


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
    error = present(row.get(ERROR_COLUMN)) or None
    decoding = "schema" if schema_given and error is None else None
    return int(row["pos"]), Completion(
        "" if error else str(present(row.get("generated_text")) or ""),
        int(present(row.get("num_input_tokens")) or 0),
        int(present(row.get("num_generated_tokens")) or 0),
        error=error,
        decoding=decoding,
    )


def present(value: Any) -> Any:
    """A row's value, None where the column holds none (pandas and numpy batches give NaN for
    a missing number)."""
    return None if isinstance(value, float) and value != value else value


def rows_of(batch: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The rows of a block of columns."""
    return [dict(zip(batch, values, strict=True)) for values in zip(*batch.values(), strict=True)]


def all_answered(done: list[Completion | None]) -> list[Completion]:
    """The answers of a finished pipeline by position; a position left unanswered is an error
    (a pipeline that ends early must not pass for a complete stage)."""
    missing = sum(c is None for c in done)
    if missing:
        raise RuntimeError(f"the Ray pipeline finished without answering {missing} prompts")
    return [c for c in done if c is not None]


class RayDataVLLM:
    """An LLM backend answering each batch with a `ray.data.llm` vLLM processor (after
    `make_room`, which frees the cluster resources the executor's model pool holds)."""

    def __init__(
        self,
        llm_cfg: dict,
        workers: int,
        parts: Path | None = None,
        make_room: Callable[[], None] | None = None,
    ) -> None:
        from transformers import AutoTokenizer  # the driver counts prompt tokens itself

        self.cfg, self.workers, self.parts, self.make_room = llm_cfg, workers, parts, make_room
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

        if self.make_room is not None:
            self.make_room()
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
        answered = processor(ray.data.from_items(prompt_rows(prompts)))
        if self.parts is not None:  # the processor's blocks written as parts on the cluster
            kept = {"folder": str(self.parts), "columns": (*ANSWER_COLUMNS, ERROR_COLUMN)}
            answered = answered.map_batches(
                rows_to_part, fn_kwargs=kept, batch_size=None, batch_format="pyarrow"
            )
        blocks = answered.iter_batches(batch_size=None, batch_format="numpy")

        def answers():  # each block's (positions, completions)
            for batch in blocks if self.parts is None else parts_read(blocks):
                pairs = [completion_of(row, schema_given) for row in rows_of(batch)]
                yield [p for p, _ in pairs], [c for _, c in pairs]

        return all_answered(by_position(len(prompts), answers(), on_done))


class RayDataLLM:
    """An in-process LLM backend (transformers; vLLM without `ray.data.llm`) answering each batch
    with a Ray Data pipeline: `workers` actors hold one engine each (`gpus` GPUs per actor),
    blocks of the model's `batch_size` prompts go to whichever actor is free (their answers
    written as Parquet parts in `parts` when given), after `make_room`, which frees the
    cluster resources the executor's model pool holds."""

    def __init__(
        self,
        llm_cfg: dict,
        workers: int,
        gpus: float,
        parts: Path | None = None,
        make_room: Callable[[], None] | None = None,
    ) -> None:
        self.cfg, self.workers, self.parts, self.make_room = llm_cfg, workers, parts, make_room
        # a vLLM engine spans tensor_parallel_size GPUs, all of them its actor's
        tp = llm_cfg["tensor_parallel_size"] if llm_cfg["backend"] == "vllm" and gpus else 0
        self.gpus = max(gpus, tp)
        # the driver's own backend loads only its tokenizer (weights load on first generate):
        # the model id the caches key on, and prompt token counts
        self.tokenizer_side = make_backend(LLMConfig(**llm_cfg))
        self.model_id = self.tokenizer_side.model_id

    def count_tokens(self, prompts: list[Prompt]) -> list[int]:
        """Prompt tokens after the chat template."""
        return self.tokenizer_side.count_tokens(prompts)

    def generate(
        self, prompts: list[Prompt], params: GenParams, on_done: Done | None = None
    ) -> list[Completion]:
        """Answer the prompts on the cluster; each finished block reaches `on_done` at once."""
        if self.make_room is not None:
            self.make_room()
        sent = [json.dumps(p) for p in prompts]
        args, block = (self.cfg, params), max(1, self.cfg["batch_size"])
        pool = (self.workers, self.gpus, block, self.parts)
        answers = (
            (out["pos"].tolist(), [Completion(**json.loads(c)) for c in out["out"]])
            for out in stream_blocks(GenerateBlocks, args, sent, *pool)
        )
        return all_answered(by_position(len(prompts), answers, on_done))
