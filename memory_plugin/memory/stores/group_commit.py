"""Group commit for a store whose writes cost a round trip and a refresh each (OpenSearch).

The first write flushes at once, alone; writes that arrive while a flush is in flight
wait and go together in the next one.  Under no load nothing waits; under load one
flush (one ``_bulk``, one refresh) serves many writes, as one SQLite COMMIT serves a
group in ``memory_plugin.sqlite``.  ``flush`` answers every write on its own: one
write's failure is that write's alone.  Reads that must see every write acknowledged
before they were asked (a memory's version) are grouped the same way: each group's
request is sent after all of its reads were asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Most writes in one flush: a ``_bulk`` of a few hundred documents stays small.
GROUP_LIMIT = 256


class GroupCommit(Generic[T, R]):
    """Writes that arrive together, flushed together; each caller gets its own write's outcome."""

    def __init__(self, flush: Callable[[Sequence[T]], Awaitable[Sequence[R | Exception]]]) -> None:
        self._flush = flush
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._draining: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        """``item``'s outcome once its group is flushed.  A cancelled caller's write still goes through."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)
        self._queue.append((item, future))
        if self._draining is None:
            self._draining = asyncio.create_task(self._drain())
        return await asyncio.shield(future)

    async def idle(self) -> None:
        """Wait until every submitted write is flushed (before the client closes)."""
        while self._draining is not None:
            await asyncio.shield(self._draining)

    async def _drain(self) -> None:
        group: list[tuple[T, asyncio.Future[R]]] = []
        try:
            while self._queue:
                group, self._queue = self._queue[:GROUP_LIMIT], self._queue[GROUP_LIMIT:]
                try:
                    outcomes: Sequence[R | Exception] = await self._flush([item for item, _ in group])
                except Exception as error:  # the whole group failed as one: each write fails with it
                    outcomes = [error] * len(group)
                for (_, future), outcome in zip(group, outcomes, strict=True):
                    if future.done():
                        continue
                    if isinstance(outcome, Exception):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
                group = []
        finally:
            for _, future in group + self._queue:  # cancelled mid-flush (the loop is closing): nobody hangs
                future.cancel()
            self._queue = []
            self._draining = None


def _retrieve(future: asyncio.Future[Any]) -> None:
    """A write whose caller went away may fail unobserved: no "exception was never retrieved" noise."""
    if not future.cancelled():
        future.exception()
