"""int8 rewrite of an fp32 ONNX encoder, with a scale and zero point per token.

ONNX Runtime's dynamic quantization gives a whole input tensor one scale: for a batch of
texts, the largest activation of any token in any of them. Every other token then loses
precision, and a text's vector depends on the batch it shares. Here each token's activations
get their own uint8 scale and zero point, and each weight column its own int8 scale. That makes
vectors the same in any batch.

Weights use 7 bits (-63..63). On CPUs without VNNI, ONNX Runtime's uint8 x int8 kernel adds
pairs of products in 16 bits: 255 x 127 x 2 overflows, 255 x 63 x 2 does not. Its
uint8 x uint8 kernel is exact at 8 bits but slower. The product and the weight
scales run as one fused ONNX Runtime op (com.microsoft MatMulIntegerToFloat). The zero points
and the token scales are applied after it: y = (acc * w_scale - zp x colsum) * x_scale.

Rounded to nearest, the 7-bit weights are most of what is lost (MiniLM on MuSiQue train
passages: cosine to fp32 0.9983 from the weights alone, 0.9995 from the activations alone).
Given activation statistics of calibration text (`activation_stats`), two calibrated steps
recover most of it (0.9979 -> 0.9991 in all): input channels are rescaled between activations
and weights (SmoothQuant's migration, exponent SMOOTHING, here toward the activations, which
have bits to spare), and weights are rounded one input row at a time with each row's error
spread over the rows not yet rounded, weighted by the inputs' Gram matrix (GPTQ).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

WEIGHT_LEVELS = 63.0
"""The largest int8 weight magnitude (7 bits: no 16-bit overflow in uint8 x int8 pairs)."""
SMOOTHING = 0.45
"""Channel scale exponent s = max|x|^a / max|w|^(1-a), chosen on MuSiQue train passages by
cosine to fp32 (0.30: 0.9986, 0.45: 0.9991, 0.60: 0.9987)."""
DAMPING = 0.01
"""Added to the Gram matrix's diagonal, as a share of its mean, before it is inverted."""

_CONSTS = {
    "q8_zero": np.array(0.0, np.float32),
    "q8_levels": np.array(255.0, np.float32),
    "q8_eps": np.array(1e-12, np.float32),
    "q8_one": np.array(1.0, np.float32),
    "q8_first": np.array([0], np.int64),
    "q8_last": np.array([-1], np.int64),
}

Stats = dict[str, tuple[np.ndarray, np.ndarray]]
"""Per weight-MatMul input name: (largest |activation| per channel, Gram matrix X^T X)."""


def weight_inputs(model) -> dict[str, list]:
    """The MatMul nodes by a 2-D weight initializer, grouped by the activation they read."""
    weights = {t.name: len(t.dims) for t in model.graph.initializer}
    groups: dict[str, list] = {}
    for node in model.graph.node:
        if node.op_type == "MatMul" and weights.get(node.input[1]) == 2:
            groups.setdefault(node.input[0], []).append(node)
    return groups


def activation_stats(model, feeds: Iterable[dict[str, np.ndarray]]) -> Stats:
    """Channel maxima and Gram matrices of every weight-MatMul input of the fp32 `model` over
    the given feeds (run by ONNX Runtime; feed texts one at a time, so no padding counts)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    probe = type(model)()
    probe.CopyFrom(model)
    names = list(weight_inputs(model))
    outputs = {o.name for o in probe.graph.output}
    probe.graph.output.extend(
        helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names if n not in outputs
    )
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    stats: Stats = {}
    for feed in feeds:
        for name, x in zip(names, session.run(names, feed), strict=True):
            rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
            peak, gram = np.abs(rows).max(0), rows.T @ rows
            if name in stats:
                peak, gram = np.maximum(stats[name][0], peak), stats[name][1] + gram
            stats[name] = (peak, gram)
    return stats


def gptq_round(w: np.ndarray, gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int weights, scale per column) of `w` (inputs x outputs) at WEIGHT_LEVELS, rounding the
    input rows in order of their activation energy and moving each row's rounding error onto
    the rows left, so that x @ w changes least for inputs with this Gram matrix (GPTQ)."""
    w, h = w.astype(np.float64), gram.astype(np.float64)
    order = np.argsort(-np.diag(h), kind="stable")
    w, h = w[order], h[np.ix_(order, order)]
    h[np.diag_indices_from(h)] += DAMPING * max(np.diag(h).mean(), 1e-12)
    scale = np.maximum(np.abs(w).max(0), 1e-12) / WEIGHT_LEVELS
    # upper Cholesky factor of h^-1: row i says how row i's error spreads to later rows
    spread = np.linalg.cholesky(np.linalg.inv(h)).T
    rounded = np.empty_like(w)
    for i in range(len(w)):
        rounded[i] = np.clip(np.round(w[i] / scale), -WEIGHT_LEVELS, WEIGHT_LEVELS)
        error = (w[i] - rounded[i] * scale) / spread[i, i]
        w[i + 1 :] -= np.outer(spread[i, i + 1 :], error)
    out = np.empty_like(rounded)
    out[order] = rounded
    return out.astype(np.int8), scale.astype(np.float32)


def quantize_per_token(model, stats: Stats | None = None, smoothing: float | None = SMOOTHING):
    """The model (an onnx ModelProto, changed in place and returned) with every MatMul by a 2-D
    weight initializer made an int8 product of per-token uint8 activations and per-column int8
    weights; MatMuls of two activations (attention's) stay float32. With `stats` of an input,
    its weights are GPTQ-rounded and, unless `smoothing` is None, its channels smoothed with
    that exponent; without, weights round to nearest."""
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    groups = weight_inputs(model)
    added = [numpy_helper.from_array(v, k) for k, v in _CONSTS.items()]
    rewritten = {n.output[0] for consumers in groups.values() for n in consumers}
    stats = stats or {}
    nodes, rows_of, smooth_of = [], {}, {}
    for x, consumers in groups.items():
        if x in stats and smoothing is not None:
            w_peak = np.max([np.abs(_weight(weights, n)).max(1) for n in consumers], axis=0)
            smooth = np.maximum(stats[x][0], 1e-5) ** smoothing
            smooth_of[x] = smooth / np.maximum(w_peak, 1e-5) ** (1 - smoothing)
    for node in graph.node:
        if node.output[0] not in rewritten:
            nodes.append(node)
            continue
        x, y, w = node.input[0], node.output[0], _weight(weights, node)
        if x not in rows_of:  # Q, K and V read one input: it is quantized once
            rows_of[x] = a = f"q8_{len(rows_of)}"
            added.append(numpy_helper.from_array(np.array([-1, w.shape[0]], np.int64), a + "_2d"))
            if x in smooth_of:
                inverse = (1 / smooth_of[x]).astype(np.float32)
                added.append(numpy_helper.from_array(inverse, a + "_unsmooth"))
            nodes += _quantize_rows(helper, x, a, x in smooth_of)
        a = rows_of[x]
        p = f"{a}_{y}".replace("/", "_")
        if x in stats:
            s = smooth_of.get(x, np.ones(len(w)))
            w_int, w_scale = gptq_round(w * s[:, None], stats[x][1] / np.outer(s, s))
        else:
            w_scale = (np.maximum(np.abs(w).max(0), 1e-12) / WEIGHT_LEVELS).astype(np.float32)
            w_int = np.round(w / w_scale).astype(np.int8)
        added += [
            numpy_helper.from_array(w_int, p + "_w"),
            numpy_helper.from_array(w_scale, p + "_w_scale"),
            numpy_helper.from_array(
                (w_int.sum(0, dtype=np.float64) * w_scale).astype(np.float32), p + "_colsum"
            ),
            numpy_helper.from_array(np.array([w.shape[1]], np.int64), p + "_width"),
        ]
        make = helper.make_node
        nodes += [
            make(
                "MatMulIntegerToFloat",
                [a + "_xq", p + "_w", "q8_one", p + "_w_scale"],
                [p + "_acc"],
                domain="com.microsoft",
            ),
            make("Mul", [a + "_zp_col", p + "_colsum"], [p + "_shift"]),
            make("Sub", [p + "_acc", p + "_shift"], [p + "_net"]),
            make("Mul", [p + "_net", a + "_scale_col"], [p + "_flat"]),
            make("Concat", [a + "_lead", p + "_width"], [p + "_shape"], axis=0),
            make("Reshape", [p + "_flat", p + "_shape"], [y]),
        ]
    used = {name for n in nodes for name in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + [t for t in added if t.name in used])
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def _weight(weights: dict, node) -> np.ndarray:
    """A weight MatMul's (inputs x outputs) weight as float32."""
    from onnx import numpy_helper

    return numpy_helper.to_array(weights[node.input[1]]).astype(np.float32)


def _quantize_rows(helper, x: str, a: str, smoothed: bool) -> list:
    """Nodes that flatten `x` to (tokens, width), divide its channels by their smoothing scales
    when `smoothed` (initializer `a`_unsmooth holds the inverses), and quantize each row to
    uint8 with its own scale and zero point (its range, zero included, over 255 steps): `a`_xq,
    the scale and the zero point as (tokens, 1) floats `a`_scale_col and `a`_zp_col, and
    `a`_lead (the shape of x without its last axis)."""
    from onnx import TensorProto

    make = helper.make_node
    flat = [make("Reshape", [x, a + "_2d"], [a + "_raw" if smoothed else a + "_x"])]
    if smoothed:
        flat.append(make("Mul", [a + "_raw", a + "_unsmooth"], [a + "_x"]))
    return [
        make("Shape", [x], [a + "_shape_in"]),
        make("Slice", [a + "_shape_in", "q8_first", "q8_last"], [a + "_lead"]),
        *flat,
        make("ReduceMax", [a + "_x"], [a + "_hi0"], axes=[1], keepdims=0),
        make("ReduceMin", [a + "_x"], [a + "_lo0"], axes=[1], keepdims=0),
        make("Max", [a + "_hi0", "q8_zero"], [a + "_hi"]),
        make("Min", [a + "_lo0", "q8_zero"], [a + "_lo"]),
        make("Sub", [a + "_hi", a + "_lo"], [a + "_span"]),
        make("Div", [a + "_span", "q8_levels"], [a + "_step"]),
        make("Max", [a + "_step", "q8_eps"], [a + "_scale"]),
        make("Div", [a + "_lo", a + "_scale"], [a + "_lo_steps"]),
        make("Neg", [a + "_lo_steps"], [a + "_zp_f"]),
        make("Round", [a + "_zp_f"], [a + "_zp_r"]),
        make("Cast", [a + "_zp_r"], [a + "_zp"], to=TensorProto.UINT8),
        make("QuantizeLinear", [a + "_x", a + "_scale", a + "_zp"], [a + "_xq"], axis=0),
        make("Unsqueeze", [a + "_scale", "q8_last"], [a + "_scale_col"]),
        make("Unsqueeze", [a + "_zp_r", "q8_last"], [a + "_zp_col"]),
    ]
