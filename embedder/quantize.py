"""The int8 variant: calibrate the fused graph, smooth it and quantise it with onnxruntime.

Only the builder imports this module; onnx, onnxruntime and tokenizers are
imported when a variant is built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .e5s1 import E5S1
from .onnx_graph import linear_inputs, onnx_graph

__all__ = ["FP32_NODES", "WEIGHT_TYPE", "calibrate", "quantize_int8"]

#: The integer GEMM the int8 variant runs: uint8 activations times uint8 weights.  onnxruntime's
#: U8S8 kernels on CPUs without VNNI (AVX2-only x86-64, e.g. AMD Zen 3) add pairs of u8 x s8
#: products in int16 with saturation, which cost cosine 0.990 to fp32 there against 0.996 on
#: VNNI CPUs; its U8U8 kernels widen to int16 before multiplying and are exact on every CPU,
#: so the variant computes the same integers everywhere (docs/int8-variants.md, fourth round).
WEIGHT_TYPE = "QUInt8"
#: Weight MatMuls left in fp32: layer 1's attention output projection alone moved the worst
#: text ("x" * 300) from cosine 0.9923 to 0.9960; it is 1/48 of the weight MatMuls' work.
FP32_NODES = ("l1.ao_mm",)


def calibrate(model: E5S1, tokenizer: dict[str, Any]) -> dict[str, np.ndarray]:
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


def quantize_int8(model: E5S1, tokenizer: dict[str, Any], tmp: Path, dst: Path) -> None:
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
    onnx.save(onnx_graph(model, fused=True, act_max=calibrate(model, tokenizer)), str(fused))
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
