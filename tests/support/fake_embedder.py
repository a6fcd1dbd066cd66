"""A small deterministic stand-in for :class:`embedder.Embedder`.

For tests about our own logic (routing, validation, storage, errors), where
the meaning of a vector does not matter and loading onnxruntime only costs
time.  Tests about search quality and integration use the real model.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer

from embedder import ensure_default_model

_WORD = re.compile(r"\w+")


@functools.cache
def default_tokenizer() -> Tokenizer:
    """The default model's tokenizer, read once a process: its 17 MB of JSON take a second or two to load."""
    return Tokenizer.from_file(str(ensure_default_model() / "tokenizer.json"))


class FakeEmbedder:
    """Hashes each word into one of ``dimension - 1`` buckets, plus a constant bucket.

    Every component is non-negative and the constant bucket is always set, so
    the cosine of any two texts lies in (0, 1], as with e5; texts that share
    words score higher.  The tokenizer is the default model's own, so that
    chunking is exactly what production does.
    """

    def __init__(self, tokenizer: Tokenizer | None, dimension: int = 64) -> None:
        self._tokenizer = tokenizer
        self.dimension = dimension
        self.max_tokens = 512  # the default model's window

    @classmethod
    def with_default_tokenizer(cls, dimension: int = 64) -> FakeEmbedder:
        """Reads the tokenizer when a test first chunks or counts: a worker whose tests never do saves a second."""
        return cls(None, dimension)

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer or default_tokenizer()

    def query(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimension), np.float32)
        vectors[:, 0] = 1.0
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.casefold()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                vectors[row, 1 + int.from_bytes(digest, "little") % (self.dimension - 1)] += 1.0
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors
