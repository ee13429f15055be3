"""int8 rewrite of an fp32 ONNX encoder, with a scale and zero point per token.

ONNX Runtime's dynamic quantization gives a whole input tensor one scale: for a batch of
texts, the largest activation of any token in any of them. Every other token then loses
precision, and a text's vector depends on the batch it shares. Here each token's activations
get their own uint8 scale and zero point, and each weight column its own int8 scale. That makes
vectors the same in any batch, and MiniLM's cosine to fp32 on MuSiQue train passages goes from
about 0.993 to 0.998 (bench/embed_floor.py prints it on the index's own texts).

Weights use 7 bits (-63..63). On CPUs without VNNI, ONNX Runtime's uint8 x int8 kernel adds
pairs of products in 16 bits: 255 x 127 x 2 overflows, 255 x 63 x 2 does not. Its
uint8 x uint8 kernel is exact at 8 bits but 1.3x slower here. The product and the weight
scales run as one fused ONNX Runtime op (com.microsoft MatMulIntegerToFloat). The zero points
and the token scales are applied after it: y = (acc * w_scale - zp x colsum) * x_scale.
"""

from __future__ import annotations

import numpy as np

WEIGHT_LEVELS = 63.0
"""The largest int8 weight magnitude (7 bits: no 16-bit overflow in uint8 x int8 pairs)."""

_CONSTS = {
    "q8_zero": np.array(0.0, np.float32),
    "q8_levels": np.array(255.0, np.float32),
    "q8_eps": np.array(1e-12, np.float32),
    "q8_one": np.array(1.0, np.float32),
    "q8_first": np.array([0], np.int64),
    "q8_last": np.array([-1], np.int64),
}


def quantize_per_token(model):
    """The model (an onnx ModelProto, changed in place and returned) with every MatMul by a 2-D
    weight initializer made an int8 product of per-token uint8 activations and per-column int8
    weights; MatMuls of two activations (attention's) stay float32."""
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    added = [numpy_helper.from_array(v, k) for k, v in _CONSTS.items()]
    nodes, rows_of = [], {}
    for node in graph.node:
        w = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        w = None if w is None else numpy_helper.to_array(w).astype(np.float32)
        if w is None or w.ndim != 2:
            nodes.append(node)
            continue
        x, y = node.input[0], node.output[0]
        if x not in rows_of:  # Q, K and V read one input: it is quantized once
            rows_of[x] = a = f"q8_{len(rows_of)}"
            added.append(numpy_helper.from_array(np.array([-1, w.shape[0]], np.int64), a + "_2d"))
            nodes += _quantize_rows(helper, x, a)
        a = rows_of[x]
        p = f"{a}_{y}".replace("/", "_")
        w_scale = np.maximum(np.abs(w).max(0), 1e-12) / WEIGHT_LEVELS
        w_int = np.round(w / w_scale)
        added += [
            numpy_helper.from_array(w_int.astype(np.int8), p + "_w"),
            numpy_helper.from_array(w_scale.astype(np.float32), p + "_w_scale"),
            numpy_helper.from_array((w_int.sum(0) * w_scale).astype(np.float32), p + "_colsum"),
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


def _quantize_rows(helper, x: str, a: str) -> list:
    """Nodes that flatten `x` to (tokens, width) and quantize each row to uint8 with its own
    scale and zero point (its range, zero included, over 255 steps): `a`_xq, the scale and the
    zero point as (tokens, 1) floats `a`_scale_col and `a`_zp_col, and `a`_lead (the shape of
    x without its last axis)."""
    from onnx import TensorProto

    make = helper.make_node
    return [
        make("Shape", [x], [a + "_shape_in"]),
        make("Slice", [a + "_shape_in", "q8_first", "q8_last"], [a + "_lead"]),
        make("Reshape", [x, a + "_2d"], [a + "_x"]),
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
