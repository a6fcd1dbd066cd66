"""Fan-out: one call to many region stores at once, each with a deadline.

A region that fails or runs past the deadline is reported, not raised, so
that the caller can answer with what the others found.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from memory_plugin.histories.stores.base import HistoryStore

log = logging.getLogger("memory_plugin.regions")

T = TypeVar("T")

#: Told of each region call: region name, seconds, and whether it failed.
RegionObserver = Callable[[str, float, bool], None]


@dataclass
class FanOut(Generic[T]):
    results: dict[str, T] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)


async def fan_out(
    stores: Mapping[str, HistoryStore],
    regions: Sequence[str],
    call: Callable[[str, HistoryStore], Awaitable[T]],
    deadline: float,
    observe: RegionObserver | None = None,
) -> FanOut[T]:
    """Run ``call(region, store)`` on every named region concurrently, each within ``deadline`` seconds."""

    async def one(region: str) -> tuple[str, T | None, bool]:
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(call(region, stores[region]), timeout=deadline)
            failed = False
        except Exception as error:  # a region's failure must not sink the others
            log.warning("region %s failed: %r", region, error)
            result, failed = None, True
        if observe is not None:
            observe(region, time.perf_counter() - started, failed)
        return region, result, failed

    outcome: FanOut[T] = FanOut()
    for region, result, failed in await asyncio.gather(*(one(region) for region in regions)):
        if failed:
            outcome.failed.append(region)
        else:
            outcome.results[region] = result  # type: ignore[assignment]
    return outcome
