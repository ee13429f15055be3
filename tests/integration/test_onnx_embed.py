"""The ONNX Runtime embedders (embedder.backend: onnx-int8 and onnx): built here from the
packaged MiniLM weights (no download), kept in their cache and reused; int8 vectors close to
fp32's on real MuSiQue passages and the same in any batch, ranking MuSiQue's gold passages as
fp32 does; fp32 ONNX vectors equal to sentence-transformers' to float rounding; the per-token
int8 rewrite, its channel smoothing and its GPTQ rounding against numpy references."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager

import numpy as np
import pytest

from graphrag_engine.config import EmbedderConfig
from graphrag_engine.errors import ConfigError
from graphrag_engine.models import make_embedder

pytest.importorskip("onnxruntime")


@contextmanager
def onnx_cache(folder):
    """GRAPHRAG_ONNX_CACHE set to `folder` while the block runs, then as it was."""
    from graphrag_engine.models import onnx_embed

    old = os.environ.get(onnx_embed.CACHE_ENV)
    os.environ[onnx_embed.CACHE_ENV] = str(folder)
    try:
        yield folder
    finally:
        if old is None:
            del os.environ[onnx_embed.CACHE_ENV]
        else:
            os.environ[onnx_embed.CACHE_ENV] = old


@pytest.fixture(scope="module")
def int8(tmp_path_factory):
    """The int8 embedder (`embedder.backend: onnx-int8`), exported into its own cache."""
    from graphrag_engine.models import onnx_embed

    with onnx_cache(tmp_path_factory.mktemp("onnx-cache")) as cache:
        yield onnx_embed.OnnxInt8Embedder(), cache


@pytest.fixture(scope="module")
def onnx32(tmp_path_factory):
    """The fp32 ONNX Runtime embedder (`embedder.backend: onnx`), exported into its own cache."""
    with onnx_cache(tmp_path_factory.mktemp("onnx32-cache")) as cache:
        yield make_embedder(EmbedderConfig(backend="onnx")), cache


def test_fp32_onnx_equals_sentence_transformers(onnx32, minilm, shared_data, monkeypatch) -> None:
    """On real MuSiQue passages (long and short, so batches pad), fp32 ONNX Runtime gives
    sentence-transformers' vectors to float rounding, queries through the same model, and is
    exported once, to a file named by its scheme."""
    from graphrag_engine.models import onnx_embed

    texts = []
    with (shared_data / "musique_corpus.jsonl").open() as f:
        for _, line in zip(range(60), f, strict=False):
            rec = json.loads(line)
            texts.append(f"{rec['title']}\n{rec['text']}")
    texts += ["Port Calloway", "Who founded Port Calloway?"]
    onnx32, cache = onnx32
    got, ref = onnx32.encode(texts), minilm.encode(texts)
    assert onnx32.model_id == "onnx-fp32:all-MiniLM-L6-v2"
    assert np.abs(got - ref).max() < 1e-4, np.abs(got - ref).max()
    assert (got * ref).sum(1).min() > 1 - 1e-6
    assert np.array_equal(onnx32.encode_queries(texts[-2:]), onnx32.encode(texts[-2:]))
    # a text alone pads nothing: the same vector to float rounding as in its batch
    alone = np.stack([onnx32.encode([t])[0] for t in texts[:5]])
    assert np.abs(alone - got[:5]).max() < 1e-5
    (built,) = cache.glob("*.onnx")
    assert built.name.endswith("-fp32.onnx")
    monkeypatch.setenv(onnx_embed.CACHE_ENV, str(cache))
    monkeypatch.setattr(onnx_embed, "export_fp32_atomic", lambda *a: pytest.fail("exported again"))
    again = onnx_embed.OnnxEmbedder(scheme=onnx_embed.FP32)  # the cached export
    assert np.array_equal(again.encode(texts[:3]), onnx32.encode(texts[:3]))


def test_built_once_and_reused(int8, monkeypatch) -> None:
    from graphrag_engine.models import onnx_embed

    embedder, cache = int8
    (built,) = cache.glob("*.onnx")
    assert embedder.model_id == "onnx-int8-gptq:all-MiniLM-L6-v2"
    assert built.name.endswith("-int8-gptq.onnx")
    monkeypatch.setenv(onnx_embed.CACHE_ENV, str(cache))
    monkeypatch.setattr(onnx_embed, "export_int8", lambda *a: pytest.fail("exported again"))
    again = onnx_embed.OnnxInt8Embedder(batch_size=1)  # fixed batches of one text
    assert list(cache.glob("*")) == [built]
    texts = ["Port Calloway was founded in 1843.", "A river runs through it."]
    assert np.array_equal(again.encode(texts), embedder.encode(texts))
    assert embedder.encode([]).shape == (0, 384)


def test_vectors_and_rankings_follow_fp32(int8, minilm, shared_data) -> None:
    embedder, _ = int8
    questions = [json.loads(x) for x in (shared_data / "musique_dev.jsonl").open()][:20]
    wanted = {p for q in questions for p in q["context_passage_ids"]}
    passages = {}
    with (shared_data / "musique_corpus.jsonl").open() as f:
        for line in f:
            rec = json.loads(line)
            if rec["id"] in wanted:
                passages[rec["id"]] = f"{rec['title']}\n{rec['text']}"
    ids, texts = list(passages), list(passages.values())
    fast, ref = embedder.encode(texts), minilm.encode(texts)
    cosine = (fast * ref).sum(1)
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    # per-tensor int8 (ONNX Runtime's dynamic quantization) kept a mean of 0.993 here, per-token
    # with weights rounded to nearest 0.998
    assert cosine.min() > 0.995 and cosine.mean() > 0.9985, (cosine.min(), cosine.mean())
    one_at_a_time = np.stack([embedder.encode([t])[0] for t in texts[:12]])
    assert np.array_equal(one_at_a_time, fast[:12])  # a text's scales are its own

    asked = [q["question"] for q in questions]
    top_fast = np.argsort(-(embedder.encode(asked) @ fast.T), axis=1)[:, :5]
    top_ref = np.argsort(-(minilm.encode(asked) @ ref.T), axis=1)[:, :5]
    overlap = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(top_fast, top_ref, strict=True)])
    assert overlap > 0.9, overlap
    gold = [{ids.index(p) for p in q["supporting_passage_ids"]} for q in questions]
    hits = [
        np.mean([len(g & set(t)) / len(g) for g, t in zip(gold, top, strict=True)])
        for top in (top_fast, top_ref)
    ]
    # recall@5 over the 20 questions' passages: one gold passage moves it by 0.025-0.05
    assert abs(hits[0] - hits[1]) <= 0.1, hits


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_runs_on_the_cpu_only(backend) -> None:
    with pytest.raises(ConfigError, match=f"'{backend}' runs on the CPU"):
        make_embedder(EmbedderConfig(backend=backend, device="cuda"))


def test_an_int8_index_is_queried_with_its_embedder(int8, minilm, run_cli, tmp_path) -> None:
    """A query config that leaves the embedder at its default embeds as the index did: int8
    for index-side texts, fp32 for the queries."""
    from graphrag_engine.methods import query_config
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.store import open_index

    embedder, _ = int8
    cfg = tmp_path / "int8.yaml"
    cfg.write_text("models:\n  embedder:\n    backend: onnx-int8\n")
    out = tmp_path / "idx"
    built = run_cli("index", "--demo", "--out", str(out), "--config", str(cfg))
    assert built.returncode == 0, built.stderr
    index = open_index(out)
    assert index.manifest["models"]["embedder"] == embedder.model_id
    ctx = QueryContext(index, query_config("naive"), tmp_path / "run")
    asked = ["Who founded Port Calloway?", "Which river runs through it?"]
    # queries are embedded at fp32 by the same weights, against the int8 index vectors
    np.testing.assert_allclose(ctx.encode_queries(asked), minilm.encode(asked), atol=1e-5)
    assert np.abs(ctx.encode_queries(asked) - embedder.encode(asked)).max() > 1e-4
    from graphrag_engine.demo import questions_path

    ran = run_cli("query", str(out), str(questions_path()), "--method", "naive",
                  "--retrieval-only", "--out", str(tmp_path / "q"))  # fmt: skip
    assert ran.returncode == 0, ran.stderr


def _copy_of_minilm(tmp_path):
    """A copy of the packaged MiniLM folder (config files only; weights linked)."""
    import shutil

    from graphrag_engine.models.embed import packaged_minilm_path

    src = packaged_minilm_path()
    dst = tmp_path / "minilm-copy"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors"))
    (dst / "model.safetensors").symlink_to(f"{src}/model.safetensors")
    return dst


def test_the_layout_is_read_without_loading_weights(tmp_path) -> None:
    from graphrag_engine.models.onnx_embed import _mean_pooling_layout

    folder = _copy_of_minilm(tmp_path)
    assert _mean_pooling_layout(folder, "onnx") == (256, 384)
    pooling = folder / "1_Pooling" / "config.json"
    conf = json.loads(pooling.read_text())
    conf.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(conf))
    with pytest.raises(ConfigError, match="not a transformer with mean pooling"):
        _mean_pooling_layout(folder, "onnx")


def test_a_dense_head_is_refused(tmp_path) -> None:
    from graphrag_engine.models.onnx_embed import OnnxInt8Embedder

    folder = _copy_of_minilm(tmp_path)
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": 3, "name": "3", "path": "3_Dense",
                    "type": "sentence_transformers.models.Dense"})  # fmt: skip
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ConfigError, match="use the sentence-transformers backend"):
        OnnxInt8Embedder(str(folder))


def test_per_token_rewrite_equals_a_numpy_reference(tmp_path) -> None:
    """A MatMul by a weight, rewritten, gives numpy's per-token uint8 x 7-bit int8 product
    (to one rounding step of a token's activations), far closer to float32 than one scale for
    the whole tensor; a MatMul of two activations is left as it is."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from graphrag_engine.models.onnx_int8 import WEIGHT_LEVELS, quantize_per_token

    rng = np.random.default_rng(0)
    w = rng.normal(size=(16, 8)).astype(np.float32)
    x = rng.normal(size=(3, 5, 16)).astype(np.float32)
    x[0, 0] *= 40  # one outlier token
    x[1] = np.abs(x[1])  # rows with no negative value: zero point 0
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("MatMul", ["y", "t"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "n", 16]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, ["b", 8, 2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["b", "n", 2])],
        [numpy_helper.from_array(w, "w")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    rewritten = quantize_per_token(model)
    assert [n.op_type for n in rewritten.graph.node].count("MatMul") == 1  # the y x t product
    onnx.checker.check_model(rewritten)
    eye = np.broadcast_to(np.eye(8, 2, dtype=np.float32), (3, 8, 2)).copy()
    got = ort.InferenceSession(rewritten.SerializeToString(), providers=["CPUExecutionProvider"])
    y = got.run(None, {"x": x, "t": eye})[0].reshape(-1, 2)  # y's first two columns

    rows = x.reshape(-1, 16)
    lo, hi = np.minimum(rows.min(1), 0), np.maximum(rows.max(1), 0)
    scale = (hi - lo) / 255
    zp = np.round(-lo / scale)
    xq = np.clip(np.round(rows / scale[:, None]) + zp[:, None], 0, 255)
    w_scale = np.abs(w).max(0) / WEIGHT_LEVELS
    w_int = np.round(w / w_scale)
    ref = ((xq - zp[:, None]) * scale[:, None]) @ (w_int * w_scale)
    step = scale[:, None] * np.abs(w).max()  # one activation rounded the other way
    assert np.all(np.abs(y - ref[:, :2]) <= step + 1e-5)
    exact = (rows @ w)[:, :2]
    t_lo, t_scale = min(rows.min(), 0), (rows.max() - min(rows.min(), 0)) / 255
    t_zp = np.round(-t_lo / t_scale)
    per_tensor = ((np.clip(np.round(rows / t_scale) + t_zp, 0, 255) - t_zp) * t_scale) @ w
    others = slice(1, None)  # every token but the outlier, whose scale sets the tensor's
    err_token = np.abs(y - exact)[others].max()
    assert err_token < 0.25 * np.abs(per_tensor[:, :2] - exact)[others].max()


def test_gptq_rounding_against_round_to_nearest() -> None:
    """With uncorrelated inputs of equal energy GPTQ is round-to-nearest; with correlated
    inputs it changes x @ w less than round-to-nearest does, on inputs with that Gram matrix."""
    from graphrag_engine.models.onnx_int8 import WEIGHT_LEVELS, gptq_round

    rng = np.random.default_rng(1)
    w = rng.normal(size=(48, 12)).astype(np.float32)
    nearest_scale = np.abs(w).max(0) / WEIGHT_LEVELS
    nearest = np.round(w / nearest_scale)
    w_int, scale = gptq_round(w, np.eye(48))
    np.testing.assert_allclose(scale, nearest_scale, rtol=1e-6)
    assert np.array_equal(w_int, nearest)

    mix = rng.normal(size=(48, 48))
    x = rng.normal(size=(2000, 48)) @ (np.eye(48) + 2 * mix / np.sqrt(48))
    w_int, scale = gptq_round(w, x.T @ x)
    assert np.abs(w_int).max() <= WEIGHT_LEVELS
    err_gptq = np.linalg.norm(x @ w - x @ (w_int * scale))
    err_nearest = np.linalg.norm(x @ w - x @ (nearest * nearest_scale))
    assert err_gptq < 0.8 * err_nearest, (err_gptq, err_nearest)


def test_smoothed_rewrite_equals_a_numpy_reference() -> None:
    """With activation statistics, the rewrite divides each channel by its smoothing scale
    before the per-token quantization and multiplies it into the GPTQ-rounded weights: the
    output is numpy's for the same steps, closer to float32 than without statistics."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from graphrag_engine.models.onnx_int8 import (
        SMOOTHING,
        activation_stats,
        gptq_round,
        quantize_per_token,
    )

    rng = np.random.default_rng(2)
    w = rng.normal(size=(32, 8)).astype(np.float32)
    x = rng.normal(size=(4, 6, 32)).astype(np.float32)
    x[..., 3] *= 25  # an outlier channel, as in a transformer's hidden states

    def model():
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "n", 32])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "n", 8])],
            [numpy_helper.from_array(w, "w")],
        )  # fmt: skip
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    stats = activation_stats(model(), [{"x": x[i : i + 1]} for i in range(4)])
    rows = x.reshape(-1, 32).astype(np.float64)
    np.testing.assert_allclose(stats["x"][0], np.abs(rows).max(0), rtol=1e-6)
    np.testing.assert_allclose(stats["x"][1], rows.T @ rows, rtol=1e-5)

    def run(m):
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0].reshape(-1, 8)

    smoothed, plain = run(quantize_per_token(model(), stats)), run(quantize_per_token(model()))
    gptq_only = quantize_per_token(model(), stats, smoothing=None)
    muls = [
        [n.op_type for n in m.graph.node].count("Mul")
        for m in (quantize_per_token(model(), stats), gptq_only)
    ]
    assert muls[0] == muls[1] + 1  # the channel division, and only with smoothing

    def reference(s):
        w_int, w_scale = gptq_round(w * s[:, None], stats["x"][1] / np.outer(s, s))
        xs = (rows / s).astype(np.float32)
        lo, hi = np.minimum(xs.min(1), 0), np.maximum(xs.max(1), 0)
        scale = (hi - lo) / 255
        zp = np.round(-lo / scale)
        xq = np.clip(np.round(xs / scale[:, None]) + zp[:, None], 0, 255)
        step = scale[:, None] * np.abs(w_int * w_scale).max()  # one activation rounded otherwise
        return ((xq - zp[:, None]) * scale[:, None]) @ (w_int * w_scale), step

    ref, step = reference(stats["x"][0] ** SMOOTHING / np.abs(w).max(1) ** (1 - SMOOTHING))
    assert np.all(np.abs(smoothed - ref) <= step + 1e-4)
    ref, step = reference(np.ones(32))
    assert np.all(np.abs(run(gptq_only) - ref) <= step + 1e-4)
    exact = rows @ w
    assert np.abs(smoothed - exact).mean() < 0.7 * np.abs(plain - exact).mean()
