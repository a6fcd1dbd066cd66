"""Per-key asyncio locks, created on demand and dropped when nobody holds or waits for them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager


class KeyedLocks:
    """One lock per key (e.g. ``(organization_id, record_id)``); holding several takes them in sorted order."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, keys: Iterable[Hashable]) -> AsyncIterator[None]:
        """Hold every key's lock; a sorted order means two holders of overlapping sets cannot deadlock."""
        async with AsyncExitStack() as stack:
            for key in sorted(set(keys), key=repr):
                await stack.enter_async_context(self._one(key))
            yield

    @asynccontextmanager
    async def _one(self, key: Hashable) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
