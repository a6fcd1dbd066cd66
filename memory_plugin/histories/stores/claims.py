"""The one interface of record-id claims: one holder per ``(organization_id, record_id)`` at a time.

Ingesting a record is "who owns the id, where does it live, write it, remove
the older copy"; deleting one must never land in the middle of that.  Both run
while holding the record ids' claims.  Two implementations:

* ``local_claims.LocalRecordClaims``: in-process locks, for an embedded
  home region (its data folder is locked to one process, so no other writes).
* ``opensearch_claims.OpenSearchRecordClaims``: leases in the home region's
  cluster, for any number of processes and hosts in front of it.

The home region's store makes the deployment's (``HistoryStore.record_claims``).

A lease runs out, so the held section runs each step inside ``bounded()`` and
calls ``confirm()`` (fencing) before it writes or removes anything; leaving
``hold`` without an error proves the claim was kept to the end, so only then
may the caller acknowledge.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

from memory_plugin.errors import Conflict


class RecordConflict(Conflict):
    """A record id held by another writer past the wait, or taken over from this one (a 409: retry)."""

    def __init__(self, record_id: str, reason: str) -> None:
        super().__init__(reason, parameter="record_id")
        self.record_id = record_id


class Claim(abc.ABC):
    """Held record ids, as the held section sees them."""

    @abc.abstractmethod
    def bounded(self) -> AbstractAsyncContextManager[None]:
        """Cut what runs inside before the claim may run out (a 503: it may or may not have happened)."""

    @abc.abstractmethod
    async def confirm(self) -> None:
        """Prove the claim is still this holder's, and extend it; a ``RecordConflict`` if it was taken over."""


class RecordClaims(abc.ABC):
    @abc.abstractmethod
    def hold(self, organization_id: str, record_ids: Sequence[str]) -> AbstractAsyncContextManager[Claim]:
        """Hold every id's claim for the ``async with`` body, waiting a bounded time for other holders.

        A clean exit raises a ``RecordConflict`` if the claim was lost meanwhile,
        so that the caller never acknowledges work it did not hold to the end.
        """

    def __len__(self) -> int:
        """Claims this process holds or waits for."""
        return 0
