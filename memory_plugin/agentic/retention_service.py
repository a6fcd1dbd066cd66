"""The retention endpoints and the background sweep, over ``retention`` (no HTTP here).

``POST /_plugins/_ml/memory_containers/_retention/_execute`` and the dry-runs
answer in ml-commons' shapes (docs/agentic-retention.md section 5).  A caller
only ever evaluates or sweeps the containers it may see (``may_use``: its own,
those shared with its roles, every one of its organisation for the
organisation's key); the background sweep, which has no caller, takes every
container of every owner.  Inside a container a run covers every document,
whoever wrote it, as ml-commons' job does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from memory_plugin.agentic.retention import Plan, Retention, RetentionRuns
from memory_plugin.agentic.retention_settings import RetentionDefaults
from memory_plugin.agentic.stores.containers import ContainerStore
from memory_plugin.agentic.stores.retention import RetentionStore
from memory_plugin.auth import Principal
from memory_plugin.errors import StatusNotFound

log = logging.getLogger(__name__)

#: Containers one cluster-wide dry-run evaluates (ml-commons' MAX_CONTAINERS_PER_DRY_RUN).
MAX_CONTAINERS_PER_DRY_RUN = 1000


@dataclass(frozen=True, slots=True)
class RetentionTriggered:
    """An on-demand run's outcome: ``triggered``, ``already_running`` or ``retention_disabled``."""

    status: str


@dataclass(frozen=True, slots=True)
class DryRuns:
    """A cluster-wide dry run: the plan of each container evaluated, in id order."""

    plans: list[Plan]
    skipped_count: int
    #: More containers than one dry run evaluates: the first ``MAX_CONTAINERS_PER_DRY_RUN`` were.
    truncated: bool


class RetentionService:
    def __init__(
        self,
        containers: ContainerStore,
        store: RetentionStore,
        defaults: RetentionDefaults,
        *,
        enabled: bool,
        interval: float = 86400.0,
    ) -> None:
        """``containers``: those a caller may use; ``store``: every container, and the sweeps' reads and deletes."""
        self.containers = containers
        self.store = store
        self.retention = Retention(self.store, defaults, enabled=enabled)
        self.runs = RetentionRuns(self.retention)
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    # -- the endpoints ---------------------------------------------------------------------

    async def dry_run(self, owner: Principal, container_id: str) -> Plan:
        container = await self.containers.get_container(owner, container_id)
        if container is None:
            raise StatusNotFound(
                f"Failed to find memory container with the provided memory container id: {container_id}"
            )
        return await self.retention.evaluate(owner, container)

    async def dry_run_all(self, owner: Principal) -> DryRuns:
        containers = sorted(await self.containers.usable_containers(owner), key=lambda doc: doc.id)
        plans, skipped = [], 0
        for container in containers[:MAX_CONTAINERS_PER_DRY_RUN]:
            try:
                plans.append(await self.retention.evaluate(owner, container))
            except Exception:
                log.exception("retention dry-run: container %s skipped", container.id)
                skipped += 1
        return DryRuns(plans, skipped, len(containers) > MAX_CONTAINERS_PER_DRY_RUN)

    async def execute(self, owner: Principal) -> RetentionTriggered:
        """The on-demand run, over the containers the caller may use; it has finished when this answers."""
        if not self.retention.enabled:
            return RetentionTriggered("retention_disabled")
        if self.runs.running:
            return RetentionTriggered("already_running")
        containers = await self.containers.usable_containers(owner)
        totals = await self.runs.run((owner, container) for container in containers)
        return RetentionTriggered("triggered" if totals is not None else "already_running")

    async def sweep(self) -> dict[str, int] | None:
        """One run over every container; None if a run is in progress in this process."""
        return await self.runs.run(await self.store.every_container())

    def start(self) -> None:
        if self.retention.enabled and self._task is None:
            self._task = asyncio.create_task(self._loop(), name="agentic-retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                totals = await self.sweep()
                if totals and any(totals.values()):
                    log.info("memory retention sweep deleted %s", totals)
            except Exception:
                log.exception("memory retention sweep failed; the next one is in %s seconds", self.interval)
