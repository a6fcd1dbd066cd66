"""The bridge: interactions written through the memory API become searchable records.

A memory write never waits for an embedding.  The memory store writes an
outbox entry with each change the history index must mirror (an interaction
added or updated: "index"; a conversation deleted: "delete"), durably and in
the same transaction where it has transactions.  The indexer here drains the
outbox in the background, in micro-batches through the shared embedder (the
organisation is the fairness key, so a backlog never starves anyone's own
writes), and drops an entry only once the record write or deletion is durable.

It drains whatever a previous run left at start (a SIGKILL loses nothing),
retries failures with exponential backoff (a failing embedder or region: the
records land once it is back, without anyone retrying), and reads each
interaction as it is when it takes the entry, so a deleted conversation's
interactions are never indexed.  Under overload the backlog grows and is
reported (``lag``); memory writes are never slowed or refused by it.

On OpenSearch every server process runs a bridge over the same outbox.  Each
entry is claimed with a lease (``memory_plugin.leases``), a batch is given up
after half the lease, and records are ingested under their interactions' ids,
so a batch redone by another process (its first holder died) writes the same
records again.  Two processes may still hold two entries of one interaction
(written before and after an update): each re-reads what it ingested once the
write is durable, and an entry whose interaction changed meanwhile is taken
again, so the record ends as the interaction is, whichever write landed last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from memory_plugin.auth import Principal
from memory_plugin.background import Worker
from memory_plugin.dates import isoformat
from memory_plugin.errors import InvalidArgument
from memory_plugin.histories.service import MAX_TEXT_BYTES, HistoryService
from memory_plugin.histories.stores.filters import Condition, Filter
from memory_plugin.leases import OUTBOX_LEASE_SECONDS
from memory_plugin.memory.models import Interaction
from memory_plugin.memory.stores.base import MemoryStore, OutboxEntry, OutboxLag

log = logging.getLogger(__name__)

#: A "delete" entry whose conversation still exists after this many tries is dropped: that delete never happened.
MAX_DELETE_WAITS = 8


def interaction_text(interaction: Interaction) -> str:
    return "\n".join(part for part in (interaction.input, interaction.response) if part)


def interaction_record(interaction: Interaction) -> dict[str, Any]:
    """The ``ai_pipeline_storage`` record an interaction becomes."""
    metadata: dict[str, str] = {"conversation_id": interaction.conversation_id}
    if interaction.origin is not None:
        metadata["origin"] = interaction.origin
    return {
        "record_id": interaction.interaction_id,
        "record_type": "ai_pipeline_storage",
        "text": interaction_text(interaction),
        "user_id": interaction.owner.user_id,
        "record_created_at": isoformat(interaction.create_time),
        "metadata": metadata,
    }


@dataclass(frozen=True, slots=True)
class BridgeLag:
    """How far search lags behind memory writes: entries not yet applied, and the oldest one's age."""

    backlog: int
    oldest_pending_seconds: float


class BridgeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry or CollectorRegistry()
        self.backlog = Gauge(
            "memory_plugin_bridge_backlog", "Outbox entries not yet indexed (or deleted)", registry=registry
        )
        self.oldest_seconds = Gauge(
            "memory_plugin_bridge_oldest_pending_seconds",
            "Age of the oldest outbox entry: how far search lags behind memory writes",
            registry=registry,
        )
        self.done = Counter(
            "memory_plugin_bridge_entries", "Outbox entries applied, by kind and outcome", ["kind", "outcome"],
            registry=registry,
        )  # fmt: skip
        self.retries = Counter(
            "memory_plugin_bridge_retries", "Outbox batches that failed and will be retried", registry=registry
        )


class HistoryBridge(Worker):
    """Keeps the history index in step with the memory store's outbox, in the background.

    Woken by each write, and every ``poll_seconds`` too: the poll retries entries whose backoff
    has run out (and, on OpenSearch, takes over other processes' expired leases) and keeps the lag fresh.
    """

    def __init__(
        self,
        histories: HistoryService,
        store: MemoryStore,
        *,
        batch_size: int = 64,
        retry_max_seconds: float = 60.0,
        poll_seconds: float = 1.0,
        metrics: BridgeMetrics | None = None,
        batch_seconds: float = OUTBOX_LEASE_SECONDS / 2,
    ) -> None:
        """``batch_seconds``: how long a batch of leased entries may take before it is given up (and its
        entries retried): half their lease, so that no other process takes them while this one works."""
        super().__init__("history-bridge", poll_seconds)
        self.histories = histories
        self.store = store
        self.batch_size = batch_size
        self.batch_seconds = batch_seconds
        self.retry_max_seconds = retry_max_seconds
        self.metrics = metrics or BridgeMetrics()
        self.metrics.backlog.set_function(lambda: self._lag.backlog)
        self.metrics.oldest_seconds.set_function(self.oldest_pending_seconds)
        self._lag = OutboxLag(0, None)
        self._lock = asyncio.Lock()

    # -- what the memory service calls ------------------------------------------------

    def check(self, interaction: Interaction, field: str) -> None:
        """Refuse, before anything is written, an interaction no record could hold, naming ``field``."""
        size = len(interaction_text(interaction).encode("utf-8", "surrogatepass"))
        if size > MAX_TEXT_BYTES:
            raise InvalidArgument(
                f"[{field}] is too large: the interaction's input and response together hold {size} bytes, and at "
                f"most {MAX_TEXT_BYTES} can be made searchable",
                parameter=field,
            )

    def notify(self) -> None:
        """The store has a new outbox entry: count it in the lag until the next look, and drain soon."""
        self._lag = OutboxLag(self._lag.backlog + 1, self._lag.oldest_enqueued_at or time.time())
        self.wake()

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Start the indexer; it first drains whatever a previous run left in the outbox."""
        self._lag = await self.store.outbox_lag()
        await super().start()

    # -- lag ---------------------------------------------------------------------------

    @property
    def lag(self) -> BridgeLag:
        """Backlog and oldest entry's age, as of the last look at the outbox (for health and metrics)."""
        return BridgeLag(self._lag.backlog, round(self.oldest_pending_seconds(), 3))

    def oldest_pending_seconds(self) -> float:
        oldest = self._lag.oldest_enqueued_at
        return 0.0 if oldest is None else max(0.0, time.time() - oldest)

    async def settled(self, timeout: float = 60.0) -> None:
        """Wait until every entry written so far is applied (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.busy and (await self.store.outbox_lag()).backlog == 0:
                return
            await asyncio.sleep(0.02)
        raise TimeoutError(f"the history bridge did not settle: {self.lag}")

    # -- draining ------------------------------------------------------------------------

    async def drain(self) -> None:
        async with self._lock:
            while True:
                entries = await self.store.outbox_pending(self.batch_size, time.time())
                if entries:
                    await self._apply_in_time(entries)
                self._lag = await self.store.outbox_lag()
                if len(entries) < self.batch_size:
                    return

    async def _apply_in_time(self, entries: Sequence[OutboxEntry]) -> None:
        """Apply a batch; one of leased entries within ``batch_seconds``, else it is retried (by anyone)."""
        if not self.store.shared:
            await self._apply(entries)
            return
        try:
            async with asyncio.timeout(self.batch_seconds):
                await self._apply(entries)
        except TimeoutError:
            log.warning(
                "history bridge: a batch of %d entries took over %ss; retrying", len(entries), self.batch_seconds
            )
            self.metrics.retries.inc()
            await self.store.outbox_retry(entries, time.time())
        except Exception:  # the memory store failed: give the entries back rather than hold them a whole lease
            with contextlib.suppress(Exception):
                await self.store.outbox_retry(entries, time.time())
            raise

    async def _apply(self, entries: Sequence[OutboxEntry]) -> None:
        """Index, then delete (a delete is newer than any interaction of its conversation still readable)."""
        latest: dict[str, Interaction] = {}
        for entry in entries:
            if entry.kind == "index" and entry.interaction is not None and interaction_text(entry.interaction).strip():
                latest[entry.interaction.interaction_id] = entry.interaction
        by_owner: dict[Principal, list[Interaction]] = {}
        for interaction in latest.values():
            by_owner.setdefault(interaction.owner, []).append(interaction)
        owners = list(by_owner)
        indexed = await asyncio.gather(
            *(self._index(owner, by_owner[owner]) for owner in owners), return_exceptions=True
        )
        failed = {
            interaction.interaction_id
            for owner, outcome in zip(owners, indexed)
            if isinstance(outcome, BaseException)
            for interaction in by_owner[owner]
        }
        if self.store.shared:  # other processes' bridges may have written since
            failed |= await self._changed_meanwhile([i for i in latest.values() if i.interaction_id not in failed])
        done: list[OutboxEntry] = []
        retry: list[OutboxEntry] = []
        for entry in entries:
            if entry.kind == "index":
                interaction_id = entry.interaction.interaction_id if entry.interaction else None
                (retry if interaction_id in failed else done).append(entry)
        for entry in (e for e in entries if e.kind == "delete"):
            if entry.conversation_exists:  # its delete has not happened yet (or never will)
                if entry.attempts + 1 < MAX_DELETE_WAITS:
                    retry.append(entry)
                else:
                    log.warning("history bridge: conversation %s was never deleted; dropping", entry.conversation_id)
                    done.append(entry)
                continue
            where = Filter((Condition("metadata.conversation_id", "eq", (entry.conversation_id,)),))
            try:
                await self.histories.delete_matching(entry.owner, where)
            except Exception as error:
                log.warning("history bridge: deleting conversation %s failed: %s", entry.conversation_id, error)
                retry.append(entry)
            else:
                done.append(entry)
        if done:
            await self.store.outbox_done(done)
            for entry in done:
                self.metrics.done.labels(entry.kind, "applied").inc()
        if retry:
            self.metrics.retries.inc()
            attempts = min(entry.attempts for entry in retry)
            delay = min(self.retry_max_seconds, 0.5 * 2**attempts)
            await self.store.outbox_retry(retry, time.time() + delay)

    async def _changed_meanwhile(self, ingested: Sequence[Interaction]) -> set[str]:
        """The ids of ``ingested`` interactions whose record may not be as the interaction now is.

        Another process may have written a newer text (read later, ingested earlier): the entry is taken
        again.  A conversation deleted meanwhile may have had its records deleted before this write
        landed: they are deleted again."""
        current = await self.store.current_interactions(ingested)
        changed: set[str] = set()
        gone: dict[tuple[Principal, str], None] = {}
        for before, now in zip(ingested, current):
            if now is None:
                gone[(before.owner, before.conversation_id)] = None
            elif interaction_text(now) != interaction_text(before):
                changed.add(before.interaction_id)
        for owner, conversation_id in gone:
            where = Filter((Condition("metadata.conversation_id", "eq", (conversation_id,)),))
            try:
                await self.histories.delete_matching(owner, where)
            except Exception as error:
                log.warning("history bridge: deleting conversation %s failed: %s", conversation_id, error)
                changed |= {i.interaction_id for i in ingested if i.conversation_id == conversation_id}
        return changed

    async def _index(self, owner: Principal, interactions: list[Interaction]) -> None:
        records = [interaction_record(interaction) for interaction in interactions]
        try:
            await self.histories.ingest(owner, records)
        except InvalidArgument:
            if len(records) == 1:  # written before today's limits: it can never be indexed
                log.warning("history bridge: interaction %s cannot be indexed; dropped", records[0]["record_id"])
                self.metrics.done.labels("index", "dropped").inc()
                return
            for interaction in interactions:  # find the one at fault; index the others
                await self._index(owner, [interaction])
        except Exception as error:
            log.warning("history bridge: indexing %d interactions failed, will retry: %s", len(records), error)
            raise
