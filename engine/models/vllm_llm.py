"""In-process vLLM offline batch generation (GPU path, not exercised in CI).

All prompts of a stage go to one `LLM.chat` call, which vLLM schedules with continuous
batching; guided JSON constrains the output to a stage's schema where it asks for one.
"""

from __future__ import annotations

import time

from engine.errors import ConfigError
from engine.models.base import Completion, Done, GenParams, Prompt, as_messages


def _guided(schema: dict) -> dict:
    """SamplingParams keyword for guided JSON, across vLLM versions."""
    try:  # vLLM >= 0.11
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:  # vLLM 0.6 - 0.10
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}


class VLLMBackend:
    """vllm.LLM over a local model folder; one engine per process (per GPU set)."""

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
    ) -> None:
        try:
            from vllm import LLM as VLLMEngine
        except ImportError:
            raise ConfigError(
                "llm.backend 'vllm' needs vLLM and a CUDA GPU: pip install 'graphrag-engine[gpu]'"
            ) from None
        kwargs = {"max_model_len": max_model_len} if max_model_len else {}
        self.engine = VLLMEngine(
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            **kwargs,
        )
        self.tokenizer = self.engine.get_tokenizer()
        self.model_id = f"vllm:{model}"

    def count_tokens(self, prompts: list[Prompt]) -> list[int]:
        """Prompt tokens after the chat template."""
        return [
            len(
                self.tokenizer.apply_chat_template(
                    as_messages(p), tokenize=True, add_generation_prompt=True
                )
            )
            for p in prompts
        ]

    def generate(
        self, prompts: list[Prompt], params: GenParams, on_done: Done | None = None
    ) -> list[Completion]:
        """One offline batch for all prompts (vLLM schedules them with continuous batching);
        `chat` returns them together, so they reach `on_done` together at the end."""
        from vllm import SamplingParams

        extra = _guided(params.json_schema) if params.json_schema is not None else {}
        sampling = SamplingParams(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop=list(params.stop) or None,
            **extra,
        )
        t0 = time.perf_counter()
        outputs = self.engine.chat([as_messages(p) for p in prompts], sampling, use_tqdm=True)
        latency = time.perf_counter() - t0
        done = [
            Completion(
                o.outputs[0].text,
                len(o.prompt_token_ids),
                len(o.outputs[0].token_ids),
                latency_s=latency,
                finish_reason=o.outputs[0].finish_reason or "stop",
            )
            for o in outputs
        ]
        if on_done is not None:
            on_done(list(range(len(done))), done)
        return done
