"""The organisations' call budgets counted in OpenSearch, so that they hold across every process and host.

One document per organisation in ``{index_prefix}-ml-budgets`` (its id a hash
of the organisation's, which may be longer than an id may be): ``calls``, the wall-clock times of its calls in the last minute,
and ``running``, a lease per call in flight (``{token: until}``).  A call is
admitted by a write conditional on the version read (``leases.Lease``): of
two processes admitting calls at once one writes, the other reads again and
decides again, so no two calls are admitted on the same count.  A call gives
its lease back when it ends; the lease of a process that died mid-call runs
out after ``hold_seconds`` (the longest a call may take, and a margin), and
its slot is free again.

Times are the processes' wall clocks, compared across hosts, as leases are
(NTP keeps them within milliseconds; the window is a minute).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConflictError, TransportError

from memory_plugin.clock import new_id
from memory_plugin.leases import Lease
from memory_plugin.ml.budget import WINDOW_SECONDS, concurrency_spent, rate_spent
from memory_plugin.opensearch_client import get_document

log = logging.getLogger("memory_plugin.ml")

#: Kept, not indexed: nothing searches a budget, and ``running``'s keys are tokens.
MAPPINGS: dict[str, Any] = {"dynamic": False, "properties": {}}
#: Beyond the remote call's own timeout, how long a call's lease holds (a slow cluster, the answer's parsing).
LEASE_MARGIN_SECONDS = 30.0
#: Conditional writes tried before a call is refused as if the budget were spent (a storm of writers at once).
MAX_TRIES = 64


class SharedCallBudget:
    """``CallBudget``'s limits over one OpenSearch index that every process shares."""

    def __init__(
        self,
        client: Callable[[], AsyncOpenSearch],
        index: str,
        per_minute: int,
        concurrent: int,
        call_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self.index = index
        self.per_minute = per_minute
        self.concurrent = concurrent
        #: How long a call's lease holds if it is never given back (its process died).
        self.hold_seconds = call_seconds + LEASE_MARGIN_SECONDS
        self._clock = clock

    @asynccontextmanager
    async def spend(self, organization_id: str) -> AsyncIterator[None]:
        if not self.per_minute and not self.concurrent:
            yield
            return
        token, doc_id = new_id(), hashlib.sha256(organization_id.encode("utf-8", "surrogatepass")).hexdigest()
        await self._admit(organization_id, doc_id, token)
        try:
            yield
        finally:
            if self.concurrent:
                await self._give_back(organization_id, doc_id, token)

    async def _admit(self, organization_id: str, doc_id: str, token: str) -> None:
        """Count one call of the organisation and take a lease for it, or raise ``Throttled``."""
        for attempt in range(MAX_TRIES):
            now = self._clock()
            found = await get_document(self._client(), self.index, doc_id)
            source = found["_source"] if found is not None else {}
            calls = [float(t) for t in source.get("calls", ()) if float(t) > now - WINDOW_SECONDS]
            running = {key: float(until) for key, until in source.get("running", {}).items() if float(until) > now}
            if self.per_minute and len(calls) >= self.per_minute:
                raise rate_spent(self.per_minute)
            if self.concurrent and len(running) >= self.concurrent:
                raise concurrency_spent(self.concurrent)
            if self.per_minute:
                calls.append(now)
            if self.concurrent:
                running[token] = now + self.hold_seconds
            source = {"organization_id": organization_id, "calls": calls, "running": running}
            if await self._write(doc_id, found, source):
                return
            await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))  # another process wrote first
        raise concurrency_spent(self.concurrent) if self.concurrent else rate_spent(self.per_minute)

    async def _give_back(self, organization_id: str, doc_id: str, token: str) -> None:
        """End the call's lease.  A failure is logged, not raised: the call itself is done, and the lease
        runs out on its own."""
        try:
            for _ in range(MAX_TRIES):
                found = await get_document(self._client(), self.index, doc_id)
                if found is None or token not in found["_source"].get("running", {}):
                    return
                source = dict(found["_source"])
                source["running"] = {key: until for key, until in source["running"].items() if key != token}
                if await self._write(doc_id, found, source):
                    return
                await asyncio.sleep(random.uniform(0, 0.002))
        except (TransportError, OSError) as error:
            log.warning("organisation %s: a call's budget lease was not given back (%s)", organization_id, error)

    async def _write(self, doc_id: str, found: dict[str, Any] | None, source: dict[str, Any]) -> bool:
        """Write ``source`` if the document is still the version ``found`` (absent: created only if absent)."""
        if found is None:
            condition: dict[str, Any] = {"op_type": "create"}
        else:
            condition = Lease(found["_seq_no"], found["_primary_term"]).condition()
        try:
            await self._client().index(index=self.index, id=doc_id, body=source, **condition)
        except ConflictError:
            return False
        return True
