"""onnxruntime embedder over any e5-style model folder.

A model folder holds `model.onnx` (output `last_hidden_state`), a
`tokenizer.json` for the `tokenizers` library and an optional `config.json`
(prefixes, window, pooling). Nothing here is specific to e5-small, so a real
multilingual-e5-large export drops in by configuration alone.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

DEFAULTS: dict[str, Any] = {
    "query_prefix": "query: ",
    "passage_prefix": "passage: ",
    "max_tokens": 512,
    "pooling": "mean",
    "normalize": True,
    "output": "last_hidden_state",
    "precision": "fp32",
    "models": {"fp32": "model.onnx"},
}


#: onnxruntime graph passes left out: SkipLayerNormFusion turns Add + LayerNormalization into
#: SkipLayerNormalization, whose CPU kernel (onnxruntime 1.31) takes 1.3 ms where the two take
#: 0.26-0.31 ms on 480 x 384 values, one thread; its 24 calls were 17% of an int8 passage's time
#: (docs/int8-variants.md).
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]


def open_session(
    model: str | os.PathLike[str] | bytes,
    *,
    intra_threads: int | None = None,
    inter_threads: int = 1,
    optimized_model_path: str | None = None,
) -> ort.InferenceSession:
    """A CPU session with every graph optimisation but `DISABLED_OPTIMIZERS`, run sequentially.

    ``optimized_model_path`` saves the graph as optimised (to see what runs).
    """
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.inter_op_num_threads = inter_threads
    if intra_threads is not None:
        opts.intra_op_num_threads = intra_threads
    # Threads that spin after a run take a core from the search that follows (searches, SQLite,
    # BLAS share the machine with the model): they sleep instead.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if optimized_model_path is not None:
        opts.optimized_model_filepath = optimized_model_path
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(
        source, opts, providers=["CPUExecutionProvider"], disabled_optimizers=DISABLED_OPTIMIZERS
    )


#: x86-64 instruction sets that decide onnxruntime's integer GEMM kernels, best first.
_ISAS = (("avx512_vnni", "avx512-vnni"), ("avx_vnni", "avx-vnni"), ("avx512bw", "avx512"), ("avx2", "avx2"))


@functools.cache
def cpu_isa(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The best of ``_ISAS`` this CPU has ("unknown" off Linux): what the start-up log and
    ``/_health`` report, since int8 kernels differ by CPU (VNNI or not)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return "unknown"
    flags = set(next((line.partition(":")[2].split() for line in text.splitlines() if line.startswith("flags")), []))
    return next((name for flag, name in _ISAS if flag in flags), "other")


def _special_tokens_after(tokenizer: Tokenizer) -> int:
    """How many special tokens the tokenizer's post-processor puts after a text (e5's ``</s>``), from one probe."""
    bare = tokenizer.encode("a", add_special_tokens=False).ids
    wrapped = tokenizer.encode("a", add_special_tokens=True).ids
    lead = next(i for i in range(len(wrapped)) if wrapped[i : i + len(bare)] == bare)
    return len(wrapped) - lead - len(bare)


class Embedder:
    """Sentence embeddings: tokenise, run the encoder, mean-pool, L2-normalise.

    Not thread-safe for concurrent calls from many threads by design: the
    async batcher serialises calls onto one worker thread.
    """

    def __init__(
        self,
        session: ort.InferenceSession,
        tokenizer: Tokenizer,
        config: dict[str, Any],
        *,
        batch_size: int = 32,
        precision: str = "fp32",
    ) -> None:
        self.config = {**DEFAULTS, **config}
        self.precision = precision
        self.session = session
        self.tokenizer = tokenizer
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.query_prefix: str = self.config["query_prefix"]
        self.passage_prefix: str = self.config["passage_prefix"]
        self.max_tokens: int = int(self.config["max_tokens"])
        self.batch_size = batch_size
        if self.config["pooling"] not in ("mean", "cls"):
            raise ValueError(f"unsupported pooling {self.config['pooling']!r}")
        # The window is cut here as the tokenizer's own truncation cuts it (the text's tokens, then the special
        # tokens around them): a second tokenizer that truncates took 0.7 s of every start to copy.
        self._trail = _special_tokens_after(tokenizer)
        self._pad_id = next((i for i in (tokenizer.token_to_id(t) for t in ("<pad>", "[PAD]")) if i is not None), 0)
        self._input_names = [i.name for i in session.get_inputs()]
        self._output = self.config["output"]
        if self._output not in [o.name for o in session.get_outputs()]:
            self._output = session.get_outputs()[0].name
        self.dimension = self._probe_dimension()
        expected = self.config.get("dimension")
        if expected is not None and int(expected) != self.dimension:
            raise ValueError(f"config says dimension {expected}, the model produces {self.dimension}")

    @classmethod
    def from_dir(
        cls,
        path: str | os.PathLike[str],
        *,
        intra_threads: int | None = None,
        inter_threads: int = 1,
        precision: str | None = None,
        batch_size: int = 32,
    ) -> Embedder:
        """Load a model folder. `precision` picks a file from config["models"] (None: config default)."""
        folder = Path(path)
        config_path = folder / "config.json"
        config: dict[str, Any] = json.loads(config_path.read_text()) if config_path.exists() else {}
        merged = {**DEFAULTS, **config}
        precision = precision or merged["precision"]
        models: dict[str, str] = merged["models"]
        if precision not in models:
            raise ValueError(f"precision {precision!r} not available in {folder} (have {sorted(models)})")
        # onnxruntime builds the session on a thread while the tokenizer's 10 MB of JSON is read here: the build
        # lets go of the GIL, the tokenizer's parse holds it (so it is the one that must not wait for a thread to
        # start): about 1 s for both, 1.5 s one after the other.
        with ThreadPoolExecutor(1, thread_name_prefix="session-build") as pool:
            session = pool.submit(
                open_session, folder / models[precision], intra_threads=intra_threads, inter_threads=inter_threads
            )
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            return cls(session.result(), tokenizer, config, batch_size=batch_size, precision=precision)

    def describe(self) -> dict[str, Any]:
        """What runs: model, precision, and for int8 the integer GEMM and the CPU's instruction set."""
        info: dict[str, Any] = {
            "name": self.config.get("name", "unnamed"),
            "dimension": self.dimension,
            "precision": self.precision,
            "cpu": cpu_isa(),
            "onnxruntime": ort.__version__,
        }
        if self.precision == "int8":
            # the kernels the file was quantised for: u8u8 (exact everywhere) or u8s8 (saturates without VNNI)
            info["int8_gemm"] = self.config.get("int8_gemm", "u8s8")
        return info

    # ------------------------------------------------------------------ API

    def query(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries (adds the query prefix). Returns (n, dim) float32."""
        return self.embed([self.query_prefix + t for t in texts])

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents/chunks (adds the passage prefix). Returns (n, dim) float32."""
        return self.embed([self.passage_prefix + t for t in texts])

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` alone: no prefix, no special tokens (what chunking budgets)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed already-prefixed texts, in length-sorted batches; rows come back in input order."""
        out = np.empty((len(texts), self.dimension), np.float32)
        if not texts:
            return out
        windows = [self._window(e.ids) for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=True)]
        order = sorted(range(len(texts)), key=lambda i: len(windows[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([windows[i] for i in idx])
        return out

    def _window(self, ids: list[int]) -> list[int]:
        """``ids`` (special tokens included) cut to the model's window: its text's tokens are cut, the special
        tokens after them kept, as ``enable_truncation(max_length)`` does."""
        if len(ids) <= self.max_tokens:
            return ids
        return ids[: self.max_tokens - self._trail] + ids[len(ids) - self._trail :]

    # ------------------------------------------------------------ internals

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in batch)
        input_ids = np.full((len(batch), width), self._pad_id, np.int64)
        mask = np.zeros((len(batch), width), np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        feeds = {k: v for k, v in feeds.items() if k in self._input_names}
        hidden = self.session.run([self._output], feeds)[0].astype(np.float32, copy=False)
        if self.config["pooling"] == "cls":
            pooled = hidden[:, 0]
        else:
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
        if self.config["normalize"]:
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        result: np.ndarray = pooled
        return result

    def _probe_dimension(self) -> int:
        """The output width: from the graph's declared shape, else from one tiny run."""
        for out in self.session.get_outputs():
            if out.name == self._output and isinstance(out.shape[-1], int):
                return int(out.shape[-1])
        ids = self._window(self.tokenizer.encode(self.passage_prefix + "probe").ids)
        return int(self._run([ids]).shape[1])
