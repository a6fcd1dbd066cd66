"""Memory retention (ml-commons 3.8-3.9, ``MemoryRetentionJobProcessor``): what a container's policy deletes.

The documents are read on the database's thread and planned on a worker thread: a container of
100k memories sorts for a while, and the event loop serves other callers meanwhile.

One evaluation serves both the dry-run and the execute, so the dry-run counts
exactly what the execute deletes when nothing is written in between
(docs/agentic-retention.md sections 3-4 state each rule):

* sessions: non-pinned sessions whose ``last_updated_time`` is older than
  ``retention_days``, united with the least recently updated non-pinned ones
  beyond ``max_count``; their working memory goes with them (``cascade``);
* long-term: non-pinned memories older than ``retention_days``, then of those
  left the least recently updated beyond ``max_count``;
* history: the oldest (``created_time``) non-pinned entries beyond ``max_count``;
* working memory of a session-less container older than the server's TTL.

Pinned documents are never deleted and never counted against ``max_count``.
Every document of the container counts, whoever wrote it, as ml-commons filters
by container and ``pinned`` only.
A delete is conditional on the version read (``stores.retention``): a session
touched by an add after the evaluation is kept, and so is its working memory;
working memory written after the evaluation is never deleted by it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memory_plugin.agentic.models import HISTORY, LONG_TERM, SESSIONS, WORKING, enabled_types, now_millis
from memory_plugin.agentic.retention_settings import NONE, RetentionDefaults
from memory_plugin.agentic.stores.base import StoredDoc
from memory_plugin.agentic.stores.retention import RetentionStore, Snapshot
from memory_plugin.auth import Principal

log = logging.getLogger(__name__)

DAY_MILLIS = 86_400_000
#: Below this a stored time is epoch seconds (ml-commons' EPOCH_SECOND_DETECTION_THRESHOLD).
EPOCH_SECOND_THRESHOLD = 10_000_000_000
#: Count-based evictions per type and run (ml-commons' COUNT_BASED_ID_CAP).
COUNT_CAP = 50_000
#: The keys of the dry-run's answer, per memory type.
REPORT_KEYS = {SESSIONS: "sessions", LONG_TERM: "long_term", HISTORY: "history"}


def normalized(value: Any) -> int | None:
    """A stored time in epoch millis (legacy epoch seconds converted); None when unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    millis = int(value)
    return millis * 1000 if 0 < millis < EPOCH_SECOND_THRESHOLD else millis


def _pinned(doc: Snapshot) -> bool:
    return doc.source.get("pinned") is True


def _older(docs: Iterable[Snapshot], field_name: str, cutoff: int) -> list[Snapshot]:
    """Docs whose time is before ``cutoff``; a doc without a readable time is kept (ml-commons skips it)."""
    out = []
    for doc in docs:
        stamp = normalized(doc.source.get(field_name))
        if stamp is not None and stamp < cutoff:
            out.append(doc)
    return out


def _oldest(docs: Iterable[Snapshot], field_name: str, limit: int) -> list[Snapshot]:
    """The ``limit`` oldest by ``field_name`` then id (ml-commons' sort; a doc without a time sorts last)."""

    def key(doc: Snapshot) -> tuple[int, int, str]:
        stamp = normalized(doc.source.get(field_name))
        return (stamp is None, stamp or 0, doc.id)

    return sorted(docs, key=key)[: max(0, limit)]


def _working_plan(docs: list[Snapshot], expired: set[str], ttl: int, now: int) -> tuple[list[Snapshot], list[Snapshot]]:
    """The working docs of the expired sessions, and those beyond the TTL (if one applies)."""
    cascade = [doc for doc in docs if _session_of(doc) in expired]
    return cascade, _older(docs, "created_time", now - ttl * DAY_MILLIS) if ttl > 0 else []


def _session_of(doc: Snapshot) -> str | None:
    """A working doc's session: the top-level field, or the ``namespace`` one."""
    namespace = doc.source.get("namespace")
    session = doc.source.get("session_id") or (namespace.get("session_id") if isinstance(namespace, dict) else None)
    return str(session) if session is not None else None


@dataclass
class TypePlan:
    """What the policy deletes of one type, by reason (in the dry-run's order)."""

    evaluated: bool = False
    by_reason: dict[str, list[Snapshot]] = field(default_factory=dict)

    @property
    def docs(self) -> list[Snapshot]:
        return [doc for docs in self.by_reason.values() for doc in docs]


@dataclass
class Plan:
    """One container's evaluation: the dry-run's answer, and the execute's deletes."""

    container_id: str
    evaluated_at: int
    policy_source: str
    policy: Mapping[str, Mapping[str, int]] | None
    ttl_days: int
    types: dict[str, TypePlan] = field(default_factory=dict)
    pinned_would_skip: int = 0
    warnings: list[str] = field(default_factory=list)

    def plan(self, memory_type: str) -> TypePlan:
        return self.types.setdefault(memory_type, TypePlan())


@dataclass(frozen=True)
class Outcome:
    """What an execute deleted in one container, per type."""

    deleted: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


class Retention:
    """Evaluate and apply containers' retention policies, as ml-commons' retention job does."""

    def __init__(
        self,
        store: RetentionStore,
        defaults: RetentionDefaults,
        *,
        enabled: bool,
        clock: Callable[[], int] = now_millis,
    ) -> None:
        self.store = store
        self.defaults = defaults
        self.enabled = enabled
        #: Epoch millis now (tests move it to cross a retention boundary).
        self.clock = clock

    async def evaluate(self, owner: Principal, container: StoredDoc) -> Plan:
        """``dryRunContainer``: every pass, read-only.  ``owner``: anyone of the container's organisation (its
        owner, or the caller, who may use it); the container's docs count whoever wrote them."""
        config = container.source.get("configuration") or {}
        source, policy = self.defaults.effective(config)
        plan = Plan(container.id, self.clock(), source, policy, self.defaults.working_memory_ttl_days)
        if not self.enabled:
            plan.warnings.append(
                "retention is disabled cluster-wide (plugins.ml_commons.memory.retention_enabled=false); "
                "the scheduled job will not run, so nothing would be deleted"
            )
            return plan
        if source == NONE:
            plan.warnings.append(
                "container has no retention policy and no cluster defaults apply; nothing would be deleted"
            )
        types = enabled_types(container.source)
        rules = policy or {}
        now = plan.evaluated_at
        if SESSIONS in types and SESSIONS in rules:
            await self._sessions(owner, container.id, rules[SESSIONS], now, plan)
        if LONG_TERM in types and LONG_TERM in rules:
            await self._long_term(owner, container.id, rules[LONG_TERM], now, plan)
        if HISTORY in types and rules.get(HISTORY, {}).get("max_count") is not None:
            await self._history(owner, container.id, rules[HISTORY]["max_count"], plan)
        await self._working(owner, container.id, config, now, plan)
        return plan

    def _cutoff(self, now: int, days: int | None) -> int | None:
        return None if days is None else now - days * DAY_MILLIS

    def _count_excess(self, docs: list[Snapshot], max_count: int, memory_type: str, plan: Plan) -> int:
        excess = max(0, len(docs) - max_count)
        if excess > COUNT_CAP:
            plan.warnings.append(
                f"count-based eviction for {REPORT_KEYS[memory_type]} exceeds the per-run cap of {COUNT_CAP}; the "
                "dry-run reports the single-run amount and the remainder would be removed over subsequent runs"
            )
        return min(excess, COUNT_CAP)

    def _pinned_checks(
        self,
        docs: list[Snapshot],
        rule: Mapping[str, int],
        memory_type: str,
        cutoff: int | None,
        plan: Plan,
        field_name: str,
    ) -> None:
        pinned = [doc for doc in docs if _pinned(doc)]
        max_count = rule.get("max_count")
        if max_count is not None and len(pinned) > max_count:
            plan.warnings.append(
                f"pinned count ({len(pinned)}) exceeds max_count ({max_count}) for {REPORT_KEYS[memory_type]} "
                "— container will grow unbounded"
            )
        if cutoff is not None:
            plan.pinned_would_skip += len(_older(pinned, field_name, cutoff))

    async def _sessions(
        self, owner: Principal, container_id: str, rule: Mapping[str, int], now: int, plan: Plan
    ) -> None:
        docs = await self.store.snapshot(owner.organization_id, container_id, SESSIONS)
        await asyncio.to_thread(self._plan_sessions, docs, rule, now, plan)

    def _plan_sessions(self, docs: list[Snapshot], rule: Mapping[str, int], now: int, plan: Plan) -> None:
        unpinned = [doc for doc in docs if not _pinned(doc)]
        cutoff = self._cutoff(now, rule.get("retention_days"))
        by_time = _older(unpinned, "last_updated_time", cutoff) if cutoff is not None else []
        by_count: list[Snapshot] = []
        if rule.get("max_count") is not None:
            excess = self._count_excess(unpinned, rule["max_count"], SESSIONS, plan)
            timed = {doc.id for doc in by_time}
            by_count = [doc for doc in _oldest(unpinned, "last_updated_time", excess) if doc.id not in timed]
        plan.types[SESSIONS] = TypePlan(True, {"retention_days": by_time, "max_count": by_count})
        self._pinned_checks(docs, rule, SESSIONS, cutoff, plan, "last_updated_time")

    async def _long_term(
        self, owner: Principal, container_id: str, rule: Mapping[str, int], now: int, plan: Plan
    ) -> None:
        docs = await self.store.snapshot(owner.organization_id, container_id, LONG_TERM)
        await asyncio.to_thread(self._plan_long_term, docs, rule, now, plan)

    def _plan_long_term(self, docs: list[Snapshot], rule: Mapping[str, int], now: int, plan: Plan) -> None:
        unpinned = [doc for doc in docs if not _pinned(doc)]
        cutoff = self._cutoff(now, rule.get("retention_days"))
        by_time = _older(unpinned, "last_updated_time", cutoff) if cutoff is not None else []
        by_count: list[Snapshot] = []
        if rule.get("max_count") is not None:
            timed = {doc.id for doc in by_time}
            remaining = [doc for doc in unpinned if doc.id not in timed]
            excess = self._count_excess(remaining, rule["max_count"], LONG_TERM, plan)
            by_count = _oldest(remaining, "last_updated_time", excess)
        plan.types[LONG_TERM] = TypePlan(True, {"retention_days": by_time, "max_count": by_count})
        self._pinned_checks(docs, rule, LONG_TERM, cutoff, plan, "last_updated_time")

    async def _history(self, owner: Principal, container_id: str, max_count: int, plan: Plan) -> None:
        docs = await self.store.snapshot(owner.organization_id, container_id, HISTORY)
        await asyncio.to_thread(self._plan_history, docs, max_count, plan)

    def _plan_history(self, docs: list[Snapshot], max_count: int, plan: Plan) -> None:
        unpinned = [doc for doc in docs if not _pinned(doc)]
        excess = self._count_excess(unpinned, max_count, HISTORY, plan)
        plan.types[HISTORY] = TypePlan(
            True, {"retention_days": [], "max_count": _oldest(unpinned, "created_time", excess)}
        )
        self._pinned_checks(docs, {"max_count": max_count}, HISTORY, None, plan, "created_time")

    async def _working(
        self, owner: Principal, container_id: str, config: Mapping[str, Any], now: int, plan: Plan
    ) -> None:
        expired = {doc.id for doc in plan.plan(SESSIONS).docs}
        ttl = plan.ttl_days if config.get("disable_session", False) else -1
        cascade: list[Snapshot] = []
        by_ttl: list[Snapshot] = []
        if expired or ttl > 0:
            docs = await self.store.snapshot(owner.organization_id, container_id, WORKING)
            cascade, by_ttl = await asyncio.to_thread(_working_plan, docs, expired, ttl, now)
        plan.types[WORKING] = TypePlan(True, {"cascade": cascade, "ttl": by_ttl, "orphan": []})

    async def apply(self, owner: Principal, plan: Plan) -> Outcome:
        """Delete what ``plan`` decided, each doc only if unchanged since: sessions first, then the working
        memory of the sessions this call really deleted (a session touched since keeps its messages)."""
        organization_id, container_id = owner.organization_id, plan.container_id
        deleted: dict[str, int] = {}
        sessions = await self.store.delete_unchanged(organization_id, container_id, SESSIONS, plan.plan(SESSIONS).docs)
        deleted[SESSIONS] = len(sessions)
        for memory_type in (LONG_TERM, HISTORY):
            docs = plan.plan(memory_type).docs
            deleted[memory_type] = len(
                await self.store.delete_unchanged(organization_id, container_id, memory_type, docs)
            )
        gone = set(sessions)
        working = plan.plan(WORKING)
        doomed = {doc.id: doc for doc in working.by_reason.get("ttl", [])}
        doomed.update({doc.id: doc for doc in working.by_reason.get("cascade", []) if _session_of(doc) in gone})
        deleted[WORKING] = len(
            await self.store.delete_unchanged(organization_id, container_id, WORKING, list(doomed.values()))
        )
        if any(deleted.values()):
            log.info("memory retention: container %s deleted %s", container_id, deleted)
        return Outcome(deleted)

    async def execute(self, owner: Principal, container: StoredDoc) -> Outcome:
        return await self.apply(owner, await self.evaluate(owner, container))


class RetentionRuns:
    """Runs of the retention job in this process: one at a time (the on-demand trigger reports
    ``already_running`` meanwhile).  Processes need no lock among themselves: their deletes are conditional."""

    def __init__(self, retention: Retention) -> None:
        self.retention = retention
        self._lock = asyncio.Lock()

    @property
    def running(self) -> bool:
        return self._lock.locked()

    async def run(self, containers: Iterable[tuple[Principal, StoredDoc]]) -> dict[str, int] | None:
        """Execute every container's policy; None when a run is in progress already.  A container that fails
        is logged and skipped, as ml-commons' job skips it."""
        if self._lock.locked():
            return None
        async with self._lock:
            totals = {SESSIONS: 0, WORKING: 0, LONG_TERM: 0, HISTORY: 0}
            for owner, container in containers:
                try:
                    outcome = await self.retention.execute(owner, container)
                except Exception:
                    log.exception("memory retention: container %s skipped", container.id)
                    continue
                for memory_type, count in outcome.deleted.items():
                    totals[memory_type] += count
            return totals
