"""Record-id claims as this deployment needs them: this process's locks, or leases in OpenSearch.

The interface, and why the held section is bounded and fenced, is in
``stores/claims.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from memory_plugin.histories.locks import KeyedLocks
from memory_plugin.histories.stores.base import HistoryStore
from memory_plugin.histories.stores.claims import Claim, RecordClaims
from memory_plugin.settings import EmbeddedRegion, Settings


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


def claims_for(settings: Settings, stores: Mapping[str, HistoryStore]) -> RecordClaims:
    """This process's locks when the home region is embedded; else leases in the home region's cluster,
    in its store's index prefix, through its store's client."""
    if isinstance(settings.regions[settings.home_region], EmbeddedRegion):
        return LocalRecordClaims()
    from memory_plugin.histories.stores.opensearch import OpenSearchHistoryStore
    from memory_plugin.histories.stores.opensearch_claims import OpenSearchRecordClaims

    home = stores[settings.home_region]
    assert isinstance(home, OpenSearchHistoryStore), home
    return OpenSearchRecordClaims(home.client, home.prefix)
