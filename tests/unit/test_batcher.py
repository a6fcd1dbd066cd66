"""Micro-batch scheduling: queries first, long passages in small batches."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np

from embedder import AsyncEmbedder


class RecordingEmbedder:
    """Records the batches it is given; slow enough that a queue forms behind it."""

    dimension = 4

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[str]]] = []
        self.release = threading.Event()

    def _run(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        self.release.wait(5)
        self.batches.append((kind, list(texts)))
        return np.ones((len(texts), self.dimension), np.float32)

    def query(self, texts: Sequence[str]) -> np.ndarray:
        return self._run("query", texts)

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        return self._run("passage", texts)


async def test_queries_jump_the_passage_queue_and_long_passages_batch_small():
    inner = RecordingEmbedder()
    batcher = AsyncEmbedder(inner, max_batch=32, max_wait_ms=1, max_batch_chars=10_000)
    try:
        first = asyncio.ensure_future(batcher.passages(["warm-up"]))
        await asyncio.sleep(0.05)  # the worker is now busy with the warm-up batch
        long_texts = [f"{n} " + "x" * 4_000 for n in range(8)]
        ingest = asyncio.ensure_future(batcher.passages(long_texts))
        await asyncio.sleep(0.01)
        search = asyncio.ensure_future(batcher.query("where is my parcel"))
        await asyncio.sleep(0.01)
        inner.release.set()
        await asyncio.gather(first, ingest, search)
    finally:
        await batcher.close()
    kinds = [kind for kind, _ in inner.batches]
    assert kinds[:2] == ["passage", "query"], "the query waits for the running batch only"
    passage_batches = [texts for kind, texts in inner.batches[2:] if kind == "passage"]
    assert sum(len(texts) for texts in passage_batches) == 8
    assert all(sum(map(len, texts)) <= 10_000 for texts in passage_batches)
    assert max(len(texts) for texts in passage_batches) == 2
