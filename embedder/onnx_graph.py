"""The encoder as an ONNX graph: a standard BERT encoder built from an `E5S1` model.

`onnx_graph` writes model.onnx's graph and, fused and smoothed (SmoothQuant),
the graph the int8 variant is quantised from (see `quantize`). onnx is imported
only when a graph is built; only the builder imports this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .e5s1 import E5S1

__all__ = ["SMOOTHING", "linear_inputs", "onnx_graph"]


def onnx_graph(model: E5S1, *, fused: bool = False, act_max: dict[str, np.ndarray] | None = None) -> Any:
    """Build the encoder graph (opset 17). Inputs input_ids/attention_mask, output last_hidden_state.

    token_type_ids is left out: e5 only uses type 0, so that row is folded into
    the position table. The word table is stored fp16 (halves the file) and the
    gathered rows are cast to fp32 in-graph.

    ``fused`` is the form the int8 variant is quantised from: attention and GELU
    as onnxruntime's contrib kernels (Attention, Gelu), so that quantisation
    turns each layer's QKV projection and attention into one QAttention.
    Residual + LayerNorm stay Add + LayerNormalization in both forms:
    onnxruntime 1.31's SkipLayerNormalization kernel costs 3-5x as much on CPU
    (docs/int8-variants.md, third round), which is why `model.open_session`
    also turns off the optimiser pass that would fuse them back. ``act_max`` (per weight
    MatMul, see `linear_inputs`) applies SmoothQuant: see `_smoothing`.
    """
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = model.hidden, model.heads, model.ffn
    hd = H // NH
    inits: list[Any] = []
    nodes: list[Any] = []
    act_max = act_max or {}

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, inputs: list[str], name: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, domain=domain or None, **attrs))
        return name

    def smoothed(x: str, name: str, w: np.ndarray) -> tuple[str, np.ndarray]:
        """x / s in-graph and W * s ([out, in] weight), for a MatMul that has calibration data."""
        if name not in act_max:
            return x, w
        s = _smoothing(act_max[name], w, SMOOTHING[name.rsplit(".", 1)[1]])
        return node("Mul", [x, init(name + "_smooth", 1.0 / s)], name + "_in"), w * s

    def linear(x: str, name: str, w: np.ndarray, bias: np.ndarray, *, smooth: bool = True) -> str:
        """x @ W.T + bias, W given as [out, in]."""
        if smooth:
            x, w = smoothed(x, name, w)
        y = node("MatMul", [x, init(name + "_w", w.T)], name + "_mm")
        return node("Add", [y, init(name + "_b", bias)], name)

    def residual_norm(y: str, residual: str, pre: str, ln: str, res: str, out: str) -> str:
        gamma = init(pre + ln + "_w", model.f32(pre + ln + ".w"))
        beta = init(pre + ln + "_b", model.f32(pre + ln + ".b"))
        y = node("Add", [y, residual], pre + res)
        return node("LayerNormalization", [y, gamma, beta], out, axis=-1, epsilon=model.eps)

    word = np.empty((model.vocab_rows, H), np.float16)
    step = 32768
    for r in range(0, model.vocab_rows, step):
        stop = min(r + step, model.vocab_rows)
        word[r:stop] = model.q4("emb.word", model.vocab_rows, H, r, stop).astype(np.float16)
    init("word_embeddings", word)
    del word
    pos = model.f32("emb.pos").reshape(model.max_positions, H) + model.f32("emb.type").reshape(-1, H)[0]
    init("position_embeddings", pos)
    init("emb_ln_w", model.f32("emb.ln.w"))
    init("emb_ln_b", model.f32("emb.ln.b"))
    init("i64_1d_0", np.array([0], np.int64))
    init("axes_12", np.array([1, 2], np.int64))
    init("f_1", np.array(1.0, np.float32))
    init("f_neg", np.array(-1e9, np.float32))
    init("f_half", np.array(0.5, np.float32))
    init("f_isqrt2", np.array(1.0 / np.sqrt(2.0), np.float32))
    init("shape_heads", np.array([0, 0, NH, hd], np.int64))
    init("shape_hidden", np.array([0, 0, H], np.int64))
    init("split_qkv", np.array([H, H, H], np.int64))

    # embeddings
    g = node("Gather", ["word_embeddings", "input_ids"], "word_fp16", axis=0)
    x = node("Cast", [g], "word_fp32", to=TensorProto.FLOAT)
    seq = node("Shape", ["input_ids"], "seq_len", start=1, end=2)
    p = node("Slice", ["position_embeddings", "i64_1d_0", seq, "i64_1d_0"], "pos_emb")
    x = node("Add", [x, p], "emb_sum")
    x = node("LayerNormalization", [x, "emb_ln_w", "emb_ln_b"], "emb_out", axis=-1, epsilon=model.eps)

    if fused:  # Attention takes the padding mask as is: [B,S] int32, 1 for tokens
        mask = node("Cast", ["attention_mask"], "mask_i32", to=TensorProto.INT32)
    else:  # additive attention mask [B,1,1,S]: 0 for tokens, -1e9 for padding
        m = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
        m = node("Unsqueeze", [m, "axes_12"], "mask_4d")
        m = node("Sub", ["f_1", m], "mask_inv")
        mask = node("Mul", [m, "f_neg"], "mask_add")

    scale = np.float32(1.0 / np.sqrt(hd))
    for i in range(model.layers):
        pre = f"l{i}."
        # fused QKV; the 1/sqrt(hd) score scale is folded into Q
        wqkv = np.concatenate(
            [model.q4(pre + "q.w", H, H) * scale, model.q4(pre + "k.w", H, H), model.q4(pre + "v.w", H, H)]
        )
        bqkv = np.concatenate([model.f32(pre + "q.b") * scale, model.f32(pre + "k.b"), model.f32(pre + "v.b")])
        wao = model.q4(pre + "ao.w", H, H)
        if pre + "ao" in act_max:
            # the attention output is a mix of V rows, so its smoothing folds into V: no Mul needed
            ao_scale = _smoothing(act_max[pre + "ao"], wao, SMOOTHING["ao"])
            wqkv[2 * H :] /= ao_scale[:, None]
            bqkv[2 * H :] /= ao_scale
            wao = wao * ao_scale
        if fused:
            xs, wqkv = smoothed(x, pre + "qkv", wqkv)
            c = node(
                "Attention",
                [xs, init(pre + "qkv_w", wqkv.T), init(pre + "qkv_b", bqkv), mask],
                pre + "ctx_r",
                domain="com.microsoft",
                num_heads=NH,
                scale=1.0,
                mask_filter_value=-1e9,
            )
        else:
            qkv = linear(x, pre + "qkv", wqkv, bqkv)
            nodes.append(
                helper.make_node(
                    "Split", [qkv, "split_qkv"], [pre + "q", pre + "k", pre + "v"], name=pre + "split", axis=-1
                )
            )
            heads = {}
            for t, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
                split = node("Reshape", [pre + t, "shape_heads"], pre + t + "_r")
                heads[t] = node("Transpose", [split], pre + t + "_t", perm=perm)
            s = node("MatMul", [heads["q"], heads["k"]], pre + "scores")
            s = node("Add", [s, mask], pre + "scores_masked")
            s = node("Softmax", [s], pre + "probs", axis=-1)
            c = node("MatMul", [s, heads["v"]], pre + "ctx")
            c = node("Transpose", [c], pre + "ctx_t", perm=[0, 2, 1, 3])
            c = node("Reshape", [c, "shape_hidden"], pre + "ctx_r")
        a = linear(c, pre + "ao", wao, model.f32(pre + "ao.b"), smooth=False)  # folded into V above
        x = residual_norm(a, x, pre, "aln", "attn_res", pre + "attn_out")
        f = linear(x, pre + "fi", model.q4(pre + "fi.w", FF, H), model.f32(pre + "fi.b"))
        if fused:
            f = node("Gelu", [f], pre + "gelu", domain="com.microsoft")
        else:  # exact (erf) GELU; onnxruntime fuses this pattern
            e = node("Mul", [f, "f_isqrt2"], pre + "gelu_s")
            e = node("Erf", [e], pre + "gelu_erf")
            e = node("Add", [e, "f_1"], pre + "gelu_1p")
            e = node("Mul", [f, e], pre + "gelu_x")
            f = node("Mul", [e, "f_half"], pre + "gelu")
        f = linear(f, pre + "fo", model.q4(pre + "fo.w", H, FF), model.f32(pre + "fo.b"))
        x = residual_norm(f, x, pre, "oln", "ffn_res", "last_hidden_state" if i == model.layers - 1 else pre + "out")

    used = {name for n in nodes for name in n.input}  # the constants only one graph form needs
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", H])],
        [t for t in inits if t.name in used],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.microsoft", 1)] if fused else [])
    onnx_model = helper.make_model(graph, opset_imports=opsets, producer_name="memory_plugin")
    onnx_model.ir_version = 8
    return onnx_model


#: Per weight MatMul, the exponents (a, b) of s_j = max|X_j|^a / max|W_j|^b (measured, docs/int8-variants.md):
#: SmoothQuant's (alpha, 1 - alpha), except the attention output, which needs a stronger pull.
SMOOTHING = {"qkv": (0.5, 0.5), "ao": (0.75, 0.75), "fi": (0.5, 0.5), "fo": (0.7, 0.3)}


def _smoothing(act_max: np.ndarray, w: np.ndarray, exponents: tuple[float, float]) -> np.ndarray:
    """SmoothQuant's per input channel scale s_j = max|X_j|^a / max|W_j|^b, on a grid of 2^(1/8).

    onnxruntime's dynamic int8 scales activations per tensor, so a channel with
    outliers (GELU outputs reach 70 where most stay under 2) crushes the others
    to a few levels; x / s flattens the channels and W * s carries the
    difference into the weights, which are quantised per output channel. The
    grid keeps the file unchanged by calibration noise in the last bits (powers
    of two, exact in fp32, cost cosine: 0.9950 against 0.9965 on "x" * 300).
    """
    wmax = np.abs(w).max(axis=0)  # w is [out, in]
    a, b = exponents
    s = np.maximum(act_max, 1e-5) ** a / np.maximum(wmax, 1e-5) ** b
    grid: np.ndarray = np.exp2(np.round(np.log2(s) * 8) / 8).astype(np.float32)
    return grid


def linear_inputs(layers: int) -> dict[str, str]:
    """The input tensor of each weight MatMul of the fused graph, by the name SMOOTHING keys end with."""
    names: dict[str, str] = {}
    for i in range(layers):
        pre = f"l{i}."
        names |= {
            pre + "qkv": "emb_out" if i == 0 else f"l{i - 1}.out",
            pre + "ao": pre + "ctx_r",
            pre + "fi": pre + "attn_out",
            pre + "fo": pre + "gelu",
        }
    return names
