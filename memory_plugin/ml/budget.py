"""A per-organisation budget of remote model calls: so many a minute, so many at once.

One inferring add can cost many LLM calls (strategies × messages), and every
call is billed to the organisation's own key: the operator bounds both the
rate and the concurrency per organisation, and a spent budget is a clear 429
(ml-commons' throttling error), never a queue that grows.

``CallBudget`` counts in this process: right for the embedded default, where one
process holds the data folder.  With the stores on OpenSearch every process and
host counts in the cluster (``stores.opensearch_budget``), so N processes give an
organisation its budget, not N times it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from memory_plugin.errors import StatusError

WINDOW_SECONDS = 60.0
#: Organisations remembered before the idle ones are forgotten.
SWEEP_ABOVE = 1024


class Throttled(StatusError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, 429)


def rate_spent(per_minute: int) -> Throttled:
    return Throttled(
        f"Request is throttled at organization level: {per_minute} remote model calls a minute "
        "are allowed. If you think there's an issue, please contact your cluster admin."
    )


def concurrency_spent(concurrent: int) -> Throttled:
    return Throttled(
        f"Request is throttled at organization level: {concurrent} remote model calls at once "
        "are allowed. If you think there's an issue, please contact your cluster admin."
    )


class Budget(Protocol):
    def spend(self, organization_id: str) -> AbstractAsyncContextManager[None]:
        """One call of ``organization_id``: refused with 429 when its minute or its concurrency is spent."""
        ...


class CallBudget:
    """The budget counted in this process (a store only one process uses)."""

    def __init__(self, per_minute: int, concurrent: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.concurrent = concurrent
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}
        self._running: dict[str, int] = {}

    @asynccontextmanager
    async def spend(self, organization_id: str) -> AsyncIterator[None]:
        """One call of ``organization_id``: refused with 429 when its minute or its concurrency is spent."""
        now = self._clock()
        if len(self._recent) > SWEEP_ABOVE:  # organisations that stopped calling keep nothing for long
            for key in [key for key, calls in self._recent.items() if calls[-1] <= now - WINDOW_SECONDS]:
                del self._recent[key]
        recent = self._recent.setdefault(organization_id, deque())
        while recent and recent[0] <= now - WINDOW_SECONDS:
            recent.popleft()
        if self.per_minute and len(recent) >= self.per_minute:
            raise rate_spent(self.per_minute)
        running = self._running.get(organization_id, 0)
        if self.concurrent and running >= self.concurrent:
            raise concurrency_spent(self.concurrent)
        recent.append(now)
        self._running[organization_id] = running + 1
        try:
            yield
        finally:
            left = self._running[organization_id] - 1
            if left:
                self._running[organization_id] = left
            else:
                del self._running[organization_id]
