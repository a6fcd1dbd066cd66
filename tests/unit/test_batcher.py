"""Micro-batch scheduling: queries first, long passages in small batches."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np

from embedder import AsyncEmbedder
from tests.support.polling import PATIENCE, eventually


class RecordingEmbedder:
    """Records the batches it is given; slow enough that a queue forms behind it."""

    dimension = 4

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[str]]] = []
        self.release = threading.Event()
        self.started = 0

    def _run(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        self.started += 1
        self.release.wait(PATIENCE)  # the test opens it; the bound only ends a broken test
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
        await eventually(lambda: inner.started, "the worker is busy with the warm-up batch")
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


class CountingEmbedder:
    """Instant and deterministic; numbers each batch so a test can tell when a job finished."""

    dimension = 4

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def query(self, texts: Sequence[str]) -> np.ndarray:
        return self.passage(texts)

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.full((len(texts), self.dimension), len(self.batches), np.float32)


async def finished_in_batch(batcher: AsyncEmbedder, job: asyncio.Future[np.ndarray]) -> int:
    """The batch number (1-based) whose result completed ``job``'s last text."""
    return int((await job).max())


async def test_a_small_job_after_a_big_one_waits_a_bounded_number_of_batches():
    inner = CountingEmbedder()
    batcher = AsyncEmbedder(inner, max_batch=8, max_wait_ms=0, max_batch_chars=100_000)
    try:
        big = asyncio.ensure_future(batcher.passages([f"bulk {n}" for n in range(800)], tenant="org-bulk"))
        await eventually(lambda: len(inner.batches) >= 3, "the bulk load is under way", interval=0.001)
        small = asyncio.ensure_future(batcher.passages(["one interaction"], tenant="org-small"))
        submitted_at = len(inner.batches)
        small_batch = await finished_in_batch(batcher, small)
        await big
    finally:
        await batcher.close()
    # one batch may already be running, the next one carries the small job
    assert small_batch - submitted_at <= 2
    assert len(inner.batches) == -(-801 // 8)  # fairness costs no batching: every batch but one is full


async def test_tenants_share_by_characters_and_requests_within_a_tenant_share_too():
    inner = CountingEmbedder()
    batcher = AsyncEmbedder(inner, max_batch=4, max_wait_ms=50, max_batch_chars=100_000)
    try:
        jobs = {
            "a-big": batcher.passages(["a" * 100] * 40, tenant="a"),
            "a-small": batcher.passages(["a" * 100] * 2, tenant="a"),
            "b-long": batcher.passages(["b" * 400] * 10, tenant="b"),
            "c-short": batcher.passages(["c" * 10] * 20, tenant="c"),
        }
        done = dict(zip(jobs, await asyncio.gather(*jobs.values())))
    finally:
        await batcher.close()
    last = {name: int(vectors.max()) for name, vectors in done.items()}
    # c's 200 characters finish long before a's 4,200 and b's 4,000
    assert last["c-short"] < last["a-big"] and last["c-short"] < last["b-long"]
    # a's second request is not stuck behind a's first
    assert last["a-small"] * 2 <= len(inner.batches)
    # characters, not texts, are shared: b's texts are 4x longer, so b gets about a quarter as many per turn
    early = [text[0] for batch in inner.batches[:6] for text in batch]
    assert early.count("a") >= 2 * early.count("b") > 0


async def test_results_keep_input_order_and_queries_still_go_first():
    inner = CountingEmbedder()
    batcher = AsyncEmbedder(inner, max_batch=2, max_wait_ms=20, max_batch_chars=100_000)
    try:
        ingest = asyncio.ensure_future(batcher.passages([f"t{n}" for n in range(10)], tenant="a"))
        other = asyncio.ensure_future(batcher.passages(["u0", "u1", "u2"], tenant="b"))
        query = asyncio.ensure_future(batcher.query("where"))  # queued last, in the same turn
        await asyncio.gather(ingest, other, query)
    finally:
        await batcher.close()
    assert inner.batches[0] == ["where"]
    flat = [text for batch in inner.batches[1:] for text in batch]
    assert [t for t in flat if t[0] == "t"] == [f"t{n}" for n in range(10)]
    assert [t for t in flat if t[0] == "u"] == ["u0", "u1", "u2"]
    assert flat.index("u2") < flat.index("t4")  # b was interleaved with a, not queued behind it


async def test_a_short_text_whose_turn_it_is_does_not_take_long_passages_along():
    inner = RecordingEmbedder()
    batcher = AsyncEmbedder(inner, max_batch=32, max_wait_ms=1, max_batch_chars=100_000)
    try:
        first = asyncio.ensure_future(batcher.passages(["warm-up"], tenant="org-bulk"))
        await eventually(lambda: inner.started, "the worker is busy with the warm-up batch")
        bulk = asyncio.ensure_future(batcher.passages([f"{n} " + "x" * 2_000 for n in range(6)], tenant="org-bulk"))
        await asyncio.sleep(0.01)
        small = asyncio.ensure_future(batcher.passages(["one interaction"], tenant="org-small"))
        await asyncio.sleep(0.01)
        inner.release.set()
        await asyncio.gather(first, bulk, small)
    finally:
        await batcher.close()
    batches = [texts for _, texts in inner.batches[1:]]
    # org-small's turn comes first (it has been served nothing); its batch is itself alone
    assert batches[0] == ["one interaction"]
    # and the long passages still batch together afterwards
    assert sorted(len(texts) for texts in batches[1:]) == [6]


async def test_a_query_never_waits_for_company_and_those_arriving_meanwhile_batch_together():
    """With an hour's batching window, a lone query still runs at once; the ones that arrive while it runs go next, together."""
    inner = RecordingEmbedder()
    batcher = AsyncEmbedder(inner, max_batch=32, max_wait_ms=3_600_000)
    try:
        lone = asyncio.ensure_future(batcher.query("first"))
        # the worker takes it without waiting out the window
        await eventually(lambda: batcher.pending == 0 and inner.started, "the worker takes the lone query")
        later = [asyncio.ensure_future(batcher.query(f"later {n}")) for n in range(3)]
        await asyncio.sleep(0.01)
        inner.release.set()
        await asyncio.wait_for(asyncio.gather(lone, *later), PATIENCE)
    finally:
        await batcher.close()
    assert inner.batches == [("query", ["first"]), ("query", ["later 0", "later 1", "later 2"])]
