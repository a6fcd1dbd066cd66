"""Record-id claims as this process's locks: what a home region only this process writes needs (an embedded
one, its data folder locked to the process).  The interface, and why the held section is bounded and fenced,
is in ``claims``; leases for many processes are in ``opensearch_claims``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from memory_plugin.histories.locks import KeyedLocks
from memory_plugin.histories.stores.claims import Claim, RecordClaims


class _Kept(Claim):
    """A lock of this process: nobody else can take it, so there is nothing to bound or confirm."""

    def bounded(self) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def confirm(self) -> None:
        return None


class LocalRecordClaims(RecordClaims):
    """Per-key asyncio locks: exact while one process writes the records, as with an embedded home region."""

    def __init__(self) -> None:
        self.locks = KeyedLocks()
        self._kept = _Kept()

    @asynccontextmanager
    async def hold(self, organization_id: str, record_ids: Sequence[str]) -> AsyncIterator[Claim]:
        async with self.locks.hold((organization_id, record_id) for record_id in record_ids):
            yield self._kept

    def __len__(self) -> int:
        return len(self.locks)
