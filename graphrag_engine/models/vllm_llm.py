"""In-process vLLM offline batch generation (GPU path, not exercised in CI).

All prompts of a stage are queued on vLLM's engine at once, which schedules them with
continuous batching; the engine is stepped until every request has finished, and each step's
finished answers go to `on_done` straight away (so the LLM front caches and counts them as
they return, and a run killed mid-stage keeps every answer already generated). Guided JSON
constrains the output to a stage's schema where it asks for one.
"""

from __future__ import annotations

import time
import uuid

from graphrag_engine.errors import ConfigError
from graphrag_engine.models.base import Completion, Done, GenParams, Prompt, as_messages


def _guided(schema: dict) -> dict:
    """SamplingParams keyword for guided JSON, across vLLM versions."""
    try:  # vLLM >= 0.11
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:  # vLLM 0.6 - 0.10
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}


def prompt_ids(tokenizer, prompt: Prompt) -> list[int]:
    """Token ids of a prompt after the model's chat template (rendered as text, then tokenized:
    `tokenize=True` returns a dict rather than ids in recent transformers)."""
    text = tokenizer.apply_chat_template(
        as_messages(prompt), tokenize=False, add_generation_prompt=True
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class VLLMBackend:
    """vllm.LLM over a local model folder; one engine per process (per GPU set)."""

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        constrained: bool = True,
    ) -> None:
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise ConfigError(
                "llm.backend 'vllm' needs vLLM and a CUDA GPU: pip install 'graphrag-engine[gpu]'"
            ) from None
        from transformers import AutoTokenizer

        self._engine_args = {
            "model": model,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            **({"max_model_len": max_model_len} if max_model_len else {}),
        }
        self.constrained = constrained
        self._engine = None  # started on first generate: a dry run needs only the tokenizer
        self.tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
        self.model_id = f"vllm:{model}"

    @property
    def engine(self):
        """The vLLM engine (weights on the GPU), started on first use."""
        if self._engine is None:
            from vllm import LLM as VLLMEngine

            self._engine = VLLMEngine(**self._engine_args)
        return self._engine

    def context_window(self) -> int | None:
        """max_model_len when configured, else the model config's positions (engine not started)."""
        if self._engine_args.get("max_model_len"):
            return int(self._engine_args["max_model_len"])
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(self._engine_args["model"], local_files_only=True)
        window = getattr(config, "max_position_embeddings", None)
        return int(window) if window else None

    def count_tokens(self, prompts: list[Prompt]) -> list[int]:
        """Prompt tokens after the chat template."""
        return [len(prompt_ids(self.tokenizer, p)) for p in prompts]

    def generate(
        self, prompts: list[Prompt], params: GenParams, on_done: Done | None = None
    ) -> list[Completion]:
        """Queue every prompt on the engine, then step it; each step's finished requests reach
        `on_done` at once, while the others are still being generated."""
        from vllm import SamplingParams

        constrain = self.constrained and params.json_schema is not None
        extra = _guided(params.json_schema) if constrain else {}
        decoding = ("schema" if constrain else "free") if params.json_schema is not None else None
        sampling = SamplingParams(**params.sampling(), **extra)
        engine = self.engine.llm_engine
        call = uuid.uuid4().hex  # request ids unique across calls on this engine
        for i, p in enumerate(prompts):
            ids = prompt_ids(self.tokenizer, p)
            engine.add_request(f"{call}-{i}", {"prompt_token_ids": ids}, sampling)
        t0 = time.perf_counter()
        done: list[Completion | None] = [None] * len(prompts)
        while engine.has_unfinished_requests():
            finished = [o for o in engine.step() if o.finished]
            if not finished:
                continue
            latency = time.perf_counter() - t0
            indices = [int(o.request_id.rsplit("-", 1)[1]) for o in finished]
            for i, o in zip(indices, finished, strict=True):
                done[i] = Completion(
                    o.outputs[0].text,
                    len(o.prompt_token_ids),
                    len(o.outputs[0].token_ids),
                    latency_s=latency,
                    finish_reason=o.outputs[0].finish_reason or "stop",
                    decoding=decoding,
                )
            if on_done is not None:
                on_done(indices, [done[i] for i in indices])
        missing = [i for i, c in enumerate(done) if c is None]
        if missing:
            raise RuntimeError(f"vLLM finished without answering {len(missing)} requests")
        return [c for c in done if c is not None]
