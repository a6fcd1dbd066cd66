"""Async micro-batching in front of an Embedder.

Concurrent requests are coalesced so that onnxruntime sees batches (much
higher throughput than one text per run), inference runs on one worker thread
so the event loop stays responsive, and repeated queries hit an LRU cache.

Queries (someone waiting on a search) go before passages.  Passages are served
fairly: first across tenants (the ``tenant`` of :meth:`AsyncEmbedder.passages`,
e.g. the organisation), then across the requests of one tenant, by characters
embedded (start-time fair queueing).  So one organisation's 8 MiB ingest costs
another organisation's single record one batch of waiting, not minutes.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

Kind = Literal["query", "passage"]
OnBatch = Callable[[str, int, float], None]


class SyncEmbedder(Protocol):
    @property
    def dimension(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    def query(self, texts: Sequence[str]) -> np.ndarray: ...
    def passage(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class BatchStats:
    """Plain counters a metrics layer can read (or use the on_batch callback)."""

    batches: int = 0
    texts: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    cancelled: int = 0
    queue_seconds_total: float = 0.0
    batch_sizes: dict[int, int] = field(default_factory=dict)


@dataclass(eq=False)
class _Item:
    kind: Kind
    text: str
    future: asyncio.Future[np.ndarray]
    enqueued: float


class _FairQueue:
    """Items in flows (a deque per key); the active flow served least, in characters, goes next.

    A flow that starts (or restarts after draining) begins just under the level of
    the least-served active flow: it goes next, and idle time banks no more credit.  Nested: a tenant's
    flow is itself a fair queue over that tenant's requests.
    """

    def __init__(self) -> None:
        self._flows: dict[Hashable, _FairQueue | deque[_Item]] = {}
        self._served: dict[Hashable, int] = {}

    def __len__(self) -> int:
        return sum(len(flow) for flow in self._flows.values())

    def push(self, path: tuple[Hashable, ...], item: _Item) -> None:
        key, rest = path[0], path[1:]
        flow = self._flows.get(key)
        if flow is None:
            # Just under the least-served flow: a flow that was idle goes next, once (the running
            # flows' levels already count the batch in service), and banks no credit beyond that.
            self._served[key] = min(self._served.values(), default=1) - 1
            flow = self._flows[key] = _FairQueue() if rest else deque()
        if isinstance(flow, _FairQueue):
            flow.push(rest, item)
        else:
            flow.append(item)

    def peek(self) -> _Item | None:
        """The item :meth:`pop` would return (None when empty)."""
        if not self._flows:
            return None
        flow = self._flows[self._next()]
        return flow.peek() if isinstance(flow, _FairQueue) else flow[0]

    def pop(self) -> _Item:
        """The next item, its characters charged to its flows."""
        key = self._next()
        flow = self._flows[key]
        item = flow.pop() if isinstance(flow, _FairQueue) else flow.popleft()
        self._served[key] += len(item.text)
        if not flow:
            del self._flows[key], self._served[key]
        return item

    def drain(self) -> list[_Item]:
        items = [
            item for flow in self._flows.values() for item in (flow.drain() if isinstance(flow, _FairQueue) else flow)
        ]
        self._flows.clear()
        self._served.clear()
        return items

    def _next(self) -> Hashable:
        return min(self._flows, key=self._served.__getitem__)  # ties: the flow that came first


#: A batch holds texts up to this many times as long as its first one (or ``_MIX_FLOOR``).
_MIX_RATIO = 4
_MIX_FLOOR = 128


class AsyncEmbedder:
    """Micro-batching async facade: `await query(text)`, `await passages(texts)`."""

    def __init__(
        self,
        embedder: SyncEmbedder,
        *,
        max_batch: int = 32,
        max_wait_ms: float = 5.0,
        max_batch_chars: int = 4096,
        cache_size: int = 1024,
        executor: Executor | None = None,
        on_batch: OnBatch | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.embedder = embedder
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        #: Long passages gain nothing from big batches, and a big batch of them
        #: would hold every query and short text behind it for seconds.
        self.max_batch_chars = max_batch_chars
        self.cache_size = cache_size
        self.on_batch = on_batch
        self.stats = BatchStats()
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries = _FairQueue()  # one flow: first in, first out
        self._passages = _FairQueue()  # tenant -> request -> items
        self._requests = itertools.count()
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def dimension(self) -> int:
        return int(self.embedder.dimension)

    async def query(self, text: str) -> np.ndarray:
        """One query embedding (1-D, read-only); cached by exact text."""
        hit = self._cache.get(text)
        if hit is not None:
            self._cache.move_to_end(text)
            self.stats.cache_hits += 1
            return hit
        self.stats.cache_misses += 1
        vec = await self._submit("query", text)
        vec.flags.writeable = False
        self._cache[text] = vec
        self._cache.move_to_end(text)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return vec

    async def passages(self, texts: Sequence[str], *, tenant: Hashable = None) -> np.ndarray:
        """Passage embeddings (2-D, input order); not cached (chunks rarely repeat).

        ``tenant`` (e.g. the organisation) is the fairness key: tenants share
        the embedder equally by characters, and so do one tenant's calls.
        """
        if not texts:
            return np.empty((0, self.dimension), np.float32)
        flow = (tenant, next(self._requests))
        futures = [self._enqueue("passage", t, flow) for t in texts]
        try:
            rows = await asyncio.gather(*futures)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        return np.stack(rows)

    async def close(self) -> None:
        """Stop the worker, fail whatever is still queued, release the thread."""
        self._closed = True
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        for item in self._queries.drain() + self._passages.drain():
            if not item.future.done():
                item.future.set_exception(RuntimeError("AsyncEmbedder closed"))
        if self._own_executor:
            self._executor.shutdown(wait=False)

    # ------------------------------------------------------------ internals

    async def _submit(self, kind: Kind, text: str) -> np.ndarray:
        return await self._enqueue(kind, text, (None,))

    def _enqueue(self, kind: Kind, text: str, flow: tuple[Hashable, ...]) -> asyncio.Future[np.ndarray]:
        if self._closed:
            raise RuntimeError("AsyncEmbedder closed")
        loop = asyncio.get_running_loop()
        if self._worker is None:
            self._wakeup = asyncio.Event()
            self._worker = loop.create_task(self._run(), name="embedder-batcher")
        future: asyncio.Future[np.ndarray] = loop.create_future()
        queue = self._queries if kind == "query" else self._passages
        queue.push(flow, _Item(kind, text, future, time.perf_counter()))
        assert self._wakeup is not None
        self._wakeup.set()
        return future

    @property
    def pending(self) -> int:
        """Texts waiting for a batch (a cancelled waiter counts until its turn comes)."""
        return len(self._queries) + len(self._passages)

    def _peek(self, queue: _FairQueue) -> _Item | None:
        """The next live item of ``queue``; cancelled waiters on the way are dropped."""
        while (item := queue.peek()) is not None and item.future.done():
            queue.pop()
            self.stats.cancelled += 1
        return item

    def _take(self, queue: _FairQueue) -> list[_Item]:
        """Pop up to max_batch live items in the queue's order, within the character budget.

        A batch takes as long as its longest text, so a short text whose turn it is
        (one interaction, while another tenant bulk-loads) does not take long ones
        along: the batch ends at the first text much longer than the one it began with.
        """
        batch: list[_Item] = []
        chars = 0
        longest_allowed = 0
        while len(batch) < self.max_batch:
            item = self._peek(queue)
            if item is None:
                break
            if batch and (chars + len(item.text) > self.max_batch_chars or len(item.text) > longest_allowed):
                break
            if not batch:
                longest_allowed = _MIX_RATIO * max(len(item.text), _MIX_FLOOR)
            batch.append(queue.pop())
            chars += len(item.text)
        return batch

    async def _run(self) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            while not self._queries and not self._passages:
                self._wakeup.clear()
                await self._wakeup.wait()
            # Queries are someone waiting on a search: they go before passages.
            queue = self._queries if self._peek(self._queries) is not None else self._passages
            first = self._peek(queue)
            if first is None:
                continue
            # Passages wait for company until the batch is full or the first one's deadline passes.  A
            # query does not: the model is idle here, and queries arriving while it runs are batched next.
            deadline = first.enqueued + (0.0 if first.kind == "query" else self.max_wait)
            while len(queue) < self.max_batch:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), remaining)
                except TimeoutError:
                    break
            batch = self._take(queue)
            if not batch:
                continue
            started = time.perf_counter()
            queue_seconds = started - min(it.enqueued for it in batch)
            texts = list(dict.fromkeys(it.text for it in batch))  # identical texts run once
            fn = self.embedder.query if first.kind == "query" else self.embedder.passage
            try:
                vectors = await loop.run_in_executor(self._executor, fn, texts)
            except asyncio.CancelledError:
                for it in batch:
                    it.future.cancel()
                raise
            except Exception as exc:  # a failed batch fails its waiters, not the worker
                for it in batch:
                    if not it.future.done():
                        it.future.set_exception(exc)
                continue
            row = {t: i for i, t in enumerate(texts)}
            for it in batch:
                if not it.future.done():
                    it.future.set_result(vectors[row[it.text]].copy())
            self._record(first.kind, len(batch), queue_seconds)

    def _record(self, kind: str, size: int, queue_seconds: float) -> None:
        s = self.stats
        s.batches += 1
        s.texts += size
        s.queue_seconds_total += queue_seconds
        s.batch_sizes[size] = s.batch_sizes.get(size, 0) + 1
        if self.on_batch is not None:
            try:
                self.on_batch(kind, size, queue_seconds)
            except Exception:  # metrics must never break embedding
                pass
