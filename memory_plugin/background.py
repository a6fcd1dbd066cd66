"""A background task that drains a durable queue: when woken, at start, and (over a shared store) on a poll.

What it drains is written in the transaction that caused it, so a SIGKILL loses
nothing: the next start drains what is left.  The histories' bridge (the memory
outbox) and agentic memory's workers (pending embeddings, infer jobs) are each one.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging

log = logging.getLogger("memory_plugin.background")

#: After a failed drain (a full disk, a store that is down), the next try waits this long.
RETRY_SECONDS = 1.0


class Worker(abc.ABC):
    """Drains its queue whenever woken, and once at start (what a previous run left)."""

    def __init__(self, name: str, poll_seconds: float | None = None) -> None:
        """``poll_seconds``: drain this often even if not woken (None: only when woken)."""
        self.name = name
        self.poll_seconds = poll_seconds
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Drains in progress: a store's queue can look empty while a drain's write is in flight.
        self._draining = 0

    @abc.abstractmethod
    async def drain(self) -> None: ...

    def wake(self) -> None:
        self._wakeup.set()

    @property
    def busy(self) -> bool:
        """Draining, or woken to drain."""
        return bool(self._draining) or self._wakeup.is_set()

    async def start(self) -> None:
        self._wakeup.set()
        self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            # Not wait_for: on Python 3.11 it can swallow a cancel (stop) that lands as the wait ends.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_seconds):
                    await self._wakeup.wait()
            self._wakeup.clear()
            self._draining += 1
            try:
                await self.drain()
            except asyncio.CancelledError:
                raise
            except Exception:  # a store failure (a full disk): keep the queue, try again shortly
                log.exception("%s: background work failed; retrying", self.name)
                await asyncio.sleep(RETRY_SECONDS)
                self._wakeup.set()
            finally:
                self._draining -= 1
