"""The fast CPU embedder path: a local sentence-transformers model (default: the packaged
all-MiniLM-L6-v2) exported to ONNX here and quantized to int8 weights (dynamic, per channel),
run by ONNX Runtime. Nothing is downloaded: the export reads the local weights once and keeps
the int8 model in a cache folder keyed by the weights' hash, written atomically.

Its vectors are not fp32's (cosine about 0.98 or more on real passages, bench/embed_floor.py), so
it has its own model id: an index built with it is queried with it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from engine.errors import ConfigError
from engine.models.embed import DEFAULT_EMBEDDER, packaged_minilm_path

CACHE_ENV = "GRAPHRAG_ONNX_CACHE"
"""Where int8 exports are kept (default ~/.cache/graphrag-engine/onnx)."""


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
    """Export the transformer of a loaded SentenceTransformer to ONNX, quantize it to int8 and
    move the result to `out` (atomically); returns `out`."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    encoder = st_model[0].auto_model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder  # a submodule, so its weights export as initializers

        def forward(self, ids, mask, types):
            return self.encoder(
                input_ids=ids, attention_mask=mask, token_type_ids=types
            ).last_hidden_state

    example = st_model.tokenizer(["a b", "c"], padding=True, return_tensors="pt")
    work = Path(tempfile.mkdtemp(prefix="onnx-export-", dir=out.parent))
    try:
        fp32 = work / "fp32.onnx"
        with warnings.catch_warnings():  # the TorchScript exporter's notices: nothing to act on
            warnings.simplefilter("ignore")
            _export(torch, Hidden(), example, fp32)
        quantize_dynamic(
            str(fp32), str(work / "model.onnx"), weight_type=QuantType.QInt8, per_channel=True
        )
        fp32.unlink()
        os.replace(work / "model.onnx", out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


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


class OnnxInt8Embedder:
    """int8 ONNX Runtime version of a local mean-pooling sentence-transformers model."""

    def __init__(self, model: str | None = None, batch_size: int = 64) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise ConfigError(
                "embedder.backend 'onnx-int8' needs ONNX Runtime: pip install 'graphrag-engine[onnx]'"
            ) from None
        from sentence_transformers import SentenceTransformer

        default = model in (None, DEFAULT_EMBEDDER)
        folder = Path(packaged_minilm_path() if default else model)
        if not folder.exists():
            raise ConfigError(f"embedder.model: {folder} does not exist (give a local folder)")
        st = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        pool = st[1] if len(st) > 1 else None
        # sentence-transformers >= 6 names the mode; older releases set one flag per mode
        mode = getattr(pool, "pooling_mode", None)
        if not (mode in ("mean", ["mean"]) or getattr(pool, "pooling_mode_mean_tokens", False)):
            raise ConfigError(
                f"embedder.backend 'onnx-int8': {folder} does not mean-pool its tokens; use "
                "the sentence-transformers backend for it"
            )
        cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache/graphrag-engine/onnx")
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / f"{folder.name}-{_weights_hash(folder)}-int8.onnx"
        if not path.exists():
            export_int8(st, path)
        self.tokenizer, self.max_len = st.tokenizer, st.max_seq_length
        width = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
        self.dim = int(width())
        self.batch_size = batch_size
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, _threads())
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.model_id = f"onnx-int8:{DEFAULT_EMBEDDER if default else folder.name}"

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, d) float32, L2-normalized; texts of similar length share a batch."""
        out = np.zeros((len(texts), self.dim), np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for lo in range(0, len(texts), self.batch_size):
            rows = order[lo : lo + self.batch_size]
            enc = self.tokenizer(
                [texts[i] for i in rows],
                padding=True,
                truncation=True,
                max_length=self.max_len,
                return_tensors="np",
            )
            feed = {"ids": enc["input_ids"], "mask": enc["attention_mask"]}
            feed["types"] = enc.get("token_type_ids", np.zeros_like(enc["input_ids"]))
            hidden = self.session.run(None, feed)[0]
            mask = enc["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


def _threads() -> int:
    """The threads torch would use here (OMP_NUM_THREADS and Ray's limits included)."""
    import torch

    return torch.get_num_threads()
