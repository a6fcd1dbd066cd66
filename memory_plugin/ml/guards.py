"""What a model's own options do to a call: its rate limiter and its guardrails, as ml-commons applies them.

ml-commons keeps a model's rate limiter in each node's model cache: a token bucket
made when the model is deployed, holding ``limit`` tokens and refilled at ``limit``
a ``unit``, split evenly over the nodes the model runs on, so that the cluster
takes ``limit`` calls a ``unit`` in all.  Here the bucket is one document of the ml
store, taken from by compare-and-set, so every process of a deployment draws from
the same bucket and the limit holds for the deployment as a whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.errors import InvalidArgument, StatusError
from memory_plugin.ml.connectors import trusted
from memory_plugin.ml.stores.base import MLStore, StoreConflict

NANOS_PER_UNIT = {
    "NANOSECONDS": 1,
    "MICROSECONDS": 1_000,
    "MILLISECONDS": 1_000_000,
    "SECONDS": 1_000_000_000,
    "MINUTES": 60_000_000_000,
    "HOURS": 3_600_000_000_000,
    "DAYS": 86_400_000_000_000,
}
#: Compare-and-set rounds one call tries before it is throttled (other processes kept taking first).
MAX_ROUNDS = 16


def throttled() -> StatusError:
    return StatusError("Request is throttled at model level.", 429)


class RateLimiters:
    """OpenSearch's ``TokenBucket`` (``MLModelManager.createTokenBucket``), kept in the ml store: starts full
    with ``max(limit, 1)`` tokens, refills ``limit`` a ``unit``, and a call that finds less than one is refused."""

    def __init__(self, store: MLStore, clock: Callable[[], int] = time.time_ns) -> None:
        self.store = store
        self._clock = clock  # wall time: the processes of a deployment share it

    async def take(self, owner: Principal, model_id: str, limiter: Mapping[str, str]) -> None:
        """One call of the model: ml-commons' 429 when its bucket is empty."""
        limit = float(limiter["limit"])
        rate, burst = limit / NANOS_PER_UNIT[limiter["unit"]], max(limit, 1.0)
        for _ in range(MAX_ROUNDS):
            stored = await self.store.get("rate_limit", owner, model_id)
            now = self._clock()
            if stored is None or stored.source.get("limiter") != dict(limiter):  # a changed limiter starts full
                tokens = burst
            else:
                elapsed = max(0, now - int(stored.source["at"]))  # a clock behind another process adds nothing
                tokens = min(burst, float(stored.source["tokens"]) + elapsed * rate)
            if tokens < 1:
                raise throttled()
            source = {"limiter": dict(limiter), "tokens": tokens - 1, "at": now}
            if stored is None:
                try:
                    await self.store.create("rate_limit", owner, model_id, source)
                    return
                except StoreConflict:
                    continue
            if await self.store.replace("rate_limit", owner, stored, source):
                return
        raise throttled()

    async def forget(self, owner: Principal, model_id: str) -> None:
        await self.store.delete("rate_limit", owner, model_id)


class GuardrailTriggered(InvalidArgument):
    """ml-commons' ``IllegalArgumentException`` of a guardrail: a 400."""


def check_guardrail(guardrails: Mapping[str, Any] | None, side: str, text: str) -> None:
    """``LocalRegexGuardrail.validate``: a regex that matches the whole text refuses it."""
    if not guardrails:
        return
    patterns = (guardrails.get(f"{side}_guardrail") or {}).get("regex") or []
    if trusted(text, patterns):  # the same full match, by RE2, as the trusted URL patterns
        what = "user input" if side == "input" else "LLM output"
        raise GuardrailTriggered(f"guardrails triggered for {what}")
