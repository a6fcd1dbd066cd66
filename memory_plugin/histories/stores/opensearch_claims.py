"""Record-id claims as leases in the home region's cluster, for any number of processes and hosts.

Why it looks like this:

* **One document per record id**, ``{prefix}-record-claims`` / ``sha256(org, record_id)``,
  holding ``holder`` (a random token per hold) and ``expires_at`` (epoch ms).
  Taking a free id is a create-only write (``op_type=create``): of two
  writers exactly one gets it.  Every later change (renew, take over an
  expired lease, release) is conditional on the ``_seq_no``/``_primary_term``
  the holder last saw, so OpenSearch, not any process, decides who holds it.
* **All or nothing.**  A batch takes its ids in one bulk request; if any is
  held by a live lease, it lets go of those it got and backs off (bounded,
  with jitter), so two batches never hold part each while waiting for the other.
  After ``wait`` seconds the answer is a 409 naming the record id.
* **Fencing.**  The held section runs each step inside ``bounded()``, which
  cuts it ``guard`` seconds before the lease runs out on this process's
  monotonic clock, and ``confirm()`` renews every lease with a conditional
  write before anything is written or removed; the release (a conditional
  delete) is the last proof before the caller acknowledges.  A holder whose
  lease was taken over learns it there and answers 409 without removing anything.
* **After an error** the leases are shortened to ``guard`` seconds instead of
  deleted: a request cut mid-way may still reach OpenSearch, and must land
  before the next holder reads.

Why the numbers are safe:

* A holder sets ``expires_at`` to its wall clock + ``lease`` *before* sending
  the write, and stops sending at its monotonic clock + ``lease - guard``,
  both read at the same moment.  A taker takes over only once its own wall
  clock passes ``expires_at``.  So between the holder's last request and the
  earliest take-over there are ``guard`` seconds, less the clock difference
  between the two hosts: safe while clocks agree within a second (NTP keeps
  them within milliseconds) and OpenSearch applies a request within the rest
  of ``guard`` (5 s) of it being sent.
* Safety never depends on a step being short: a step longer than the lease
  is cut (a 503, retry), never continued by two holders.  The numbers only
  decide liveness: ``lease`` (30 s) exceeds the longest step, the ownership
  fan-out (cut at 5 × the search deadline, 10 s by default) and a write
  request (the region client's timeout, 10 s); ``wait`` (10 s) outlasts
  several held sections of another writer, and a dead holder's lease blocks
  its ids for at most ``lease`` seconds.
* What is left: a process frozen for longer than ``guard`` in the
  microseconds between the deadline check and handing a request to its
  socket.  Closing that would take a fencing token checked by every region
  write, which OpenSearch offers only per document.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import TransportError

from memory_plugin.errors import Unavailable
from memory_plugin.histories.locks import KeyedLocks
from memory_plugin.histories.stores.claims import Claim, RecordClaims, RecordConflict
from memory_plugin.opensearch_client import create_index

log = logging.getLogger(__name__)

LEASE_SECONDS = 30.0
GUARD_SECONDS = 5.0
WAIT_SECONDS = 10.0
#: First and longest pause between two tries at a held id (each then varies by ±50%).
BACKOFF_SECONDS = (0.025, 0.5)

MAPPINGS = {
    "dynamic": "strict",
    "properties": {
        "organization_id": {"type": "keyword"},
        "record_id": {"type": "keyword"},
        "holder": {"type": "keyword"},
        "expires_at": {"type": "long"},
    },
}
INDEX_SETTINGS = {"index": {"number_of_shards": 1, "number_of_replicas": 0}}


def claim_id(organization_id: str, record_id: str) -> str:
    """The document id: fixed length and unambiguous whatever the ids hold."""
    return hashlib.sha256(f"{organization_id}\0{record_id}".encode()).hexdigest()


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Lease:
    seq_no: int
    primary_term: int


@dataclass
class _Held(Claim):
    owner: OpenSearchRecordClaims
    organization_id: str
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)
    leases: dict[str, _Lease] = field(default_factory=dict)
    #: Loop time after which no request may be sent under these leases.
    deadline: float = float("inf")

    @asynccontextmanager
    async def bounded(self) -> AsyncIterator[None]:
        timeout = asyncio.timeout_at(self.deadline)
        try:
            async with timeout:
                yield
        except TimeoutError:
            if not timeout.expired():
                raise
            raise Unavailable(
                "the request took longer than its claim on the record ids allows, so it was cut; "
                "it may be incomplete: send it again"
            ) from None

    async def confirm(self) -> None:
        await self.owner.renew(self)


class OpenSearchRecordClaims(RecordClaims):
    """Leases on record ids in ``{prefix}-record-claims``; see the module docstring."""

    def __init__(
        self,
        client: AsyncOpenSearch,
        prefix: str,
        *,
        lease: float = LEASE_SECONDS,
        guard: float = GUARD_SECONDS,
        wait: float = WAIT_SECONDS,
    ) -> None:
        if not 0 < guard < lease:
            raise ValueError("the guard must be shorter than the lease")
        self.client, self.prefix = client, prefix
        self.index = f"{prefix}-record-claims"
        self.lease, self.guard, self.wait = lease, guard, wait
        #: This process's writers of one id queue here rather than polling OpenSearch.
        self.locks = KeyedLocks()
        self._ready = False

    def __len__(self) -> int:
        return len(self.locks)

    @asynccontextmanager
    async def hold(self, organization_id: str, record_ids: Sequence[str]) -> AsyncIterator[Claim]:
        async with self.locks.hold((organization_id, record_id) for record_id in record_ids):
            held = await self.acquire(organization_id, record_ids)
            try:
                yield held
            except BaseException:
                await self._let_go(held)
                raise
            await self.release(held)

    # -- taking ------------------------------------------------------------------------

    async def acquire(self, organization_id: str, record_ids: Sequence[str]) -> _Held:
        """Every id's lease, or a 409 once ``wait`` seconds have passed with one of them held."""
        await self._ensure_index()
        held = _Held(self, organization_id)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.wait
        pause, longest = BACKOFF_SECONDS
        while True:
            try:
                busy = await self._take(held, record_ids)
            except BaseException:
                await self.release(held, quietly=True)
                raise
            if busy is None:
                return held
            await self.release(held, quietly=True)
            if loop.time() + pause > give_up:
                raise RecordConflict(
                    busy,
                    f"record [{busy}] is being written by another request; nothing was written, send it again",
                )
            await asyncio.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(2 * pause, longest)

    async def _take(self, held: _Held, record_ids: Sequence[str]) -> str | None:
        """Create each id's lease; take over those whose lease expired.  The first id still held, or None."""
        started, expires_at = asyncio.get_running_loop().time(), _now_ms() + int(self.lease * 1000)
        created = await self._bulk(
            [
                action
                for record_id in record_ids
                for action in (
                    {"create": {"_index": self.index, "_id": claim_id(held.organization_id, record_id)}},
                    self._body(held, record_id, expires_at),
                )
            ]
        )
        taken = {record_id: result for record_id, result in zip(record_ids, created) if result["status"] == 201}
        others = [record_id for record_id in record_ids if record_id not in taken]
        if others:
            found = await self._call(
                self.client.mget(
                    index=self.index, body={"ids": [claim_id(held.organization_id, rid) for rid in others]}
                )
            )
            now = _now_ms()
            for record_id, document in zip(others, found["docs"]):
                if not document.get("found") or document["_source"]["expires_at"] >= now:
                    self._keep(held, taken, started)
                    return record_id  # live (or released just now: the next try creates it)
            replaced = await self._bulk(
                [
                    action
                    for record_id, document in zip(others, found["docs"])
                    for action in (
                        {"index": self._target(held.organization_id, record_id, document)},
                        self._body(held, record_id, expires_at),
                    )
                ]
            )
            for record_id, result in zip(others, replaced):
                if result["status"] == 200:
                    taken[record_id] = result
            self._keep(held, taken, started)
            busy = [record_id for record_id in others if record_id not in taken]
            if busy:
                return busy[0]
            log.warning("took over expired record claims", extra={"record_ids": others})
            return None
        self._keep(held, taken, started)
        return None

    def _keep(self, held: _Held, results: dict[str, dict[str, Any]], started: float) -> None:
        for record_id, result in results.items():
            held.leases[record_id] = _Lease(result["_seq_no"], result["_primary_term"])
        if results:
            held.deadline = min(held.deadline, started + self.lease - self.guard)

    # -- keeping and letting go --------------------------------------------------------------

    async def renew(self, held: _Held) -> None:
        """Extend every lease with a conditional write; a ``RecordConflict`` naming one that was taken over."""
        started, expires_at = asyncio.get_running_loop().time(), _now_ms() + int(self.lease * 1000)
        leases = dict(held.leases)
        held.leases.clear()  # until the answer says which are still ours
        results = await self._bulk(
            [
                action
                for record_id, lease in leases.items()
                for action in (
                    {"index": self._target(held.organization_id, record_id, lease)},
                    self._body(held, record_id, expires_at),
                )
            ]
        )
        kept = {record_id: result for record_id, result in zip(leases, results) if result["status"] == 200}
        held.deadline = float("inf")
        self._keep(held, kept, started)
        lost = [record_id for record_id in leases if record_id not in kept]
        if lost:
            raise self._lost(lost[0])

    async def release(self, held: _Held, *, quietly: bool = False) -> None:
        """Delete every lease conditionally: success proves each was held to the end."""
        record_ids, leases = list(held.leases), dict(held.leases)
        held.leases.clear()
        held.deadline = float("inf")
        if not record_ids:
            return
        try:
            results = await self._bulk(
                [{"delete": self._target(held.organization_id, rid, leases[rid])} for rid in record_ids]
            )
        except Unavailable:
            if quietly:
                log.warning("record claims not released; they expire", exc_info=True)
                return
            raise
        lost = [record_id for record_id, result in zip(record_ids, results) if result["status"] != 200]
        if lost and not quietly:
            raise self._lost(lost[0])

    async def _let_go(self, held: _Held) -> None:
        """After an error: shorten the leases to ``guard`` seconds, so a request cut mid-way lands first."""
        if not held.leases:
            return
        expires_at = _now_ms() + int(self.guard * 1000)
        actions = [
            action
            for record_id, lease in held.leases.items()
            for action in (
                {"index": self._target(held.organization_id, record_id, lease)},
                self._body(held, record_id, expires_at),
            )
        ]
        held.leases.clear()
        try:
            await self._bulk(actions)
        except Exception:  # the error already on its way to the caller matters more
            log.warning("record claims not shortened; they expire", exc_info=True)

    def _lost(self, record_id: str) -> RecordConflict:
        return RecordConflict(
            record_id,
            f"record [{record_id}] was taken over by another request while this one ran past its claim; "
            "this request removed nothing older, send it again",
        )

    # -- requests -----------------------------------------------------------------------------

    def _body(self, held: _Held, record_id: str, expires_at: int) -> dict[str, Any]:
        return {
            "organization_id": held.organization_id,
            "record_id": record_id,
            "holder": held.holder,
            "expires_at": expires_at,
        }

    def _target(self, organization_id: str, record_id: str, seen: _Lease | dict[str, Any]) -> dict[str, Any]:
        """A bulk action's target that applies only if the document is still as last ``seen``."""
        seq_no, primary_term = (
            (seen.seq_no, seen.primary_term) if isinstance(seen, _Lease) else (seen["_seq_no"], seen["_primary_term"])
        )
        return {
            "_index": self.index,
            "_id": claim_id(organization_id, record_id),
            "if_seq_no": seq_no,
            "if_primary_term": primary_term,
        }

    async def _bulk(self, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each item's result, in order; a 409 (taken) or 404 (gone) is an answer, anything else a 503."""
        if not actions:
            return []
        response = await self._call(self.client.bulk(body=actions))
        results = [next(iter(item.values())) for item in response["items"]]
        for result in results:
            if result["status"] not in (200, 201, 404, 409):
                raise Unavailable(f"the home region's cluster refused a record claim: {result.get('error')}; retry")
        return results

    async def _call(self, request: Any) -> Any:
        try:
            return await request
        except TransportError as error:
            raise Unavailable(
                f"the home region's cluster, which decides who writes a record id, did not answer ({error}); retry"
            ) from error

    async def _ensure_index(self) -> None:
        if not self._ready:
            await self._call(create_index(self.client, self.index, {"settings": INDEX_SETTINGS, "mappings": MAPPINGS}))
            self._ready = True
