"""What a model's own options do to a call: its rate limiter and its guardrails, as ml-commons applies them.

ml-commons keeps a model's rate limiter in its node's model cache: a token bucket
made when the model is deployed, of ``limit`` tokens refilled over one ``unit``.
Here the bucket is kept per server process, as ml-commons keeps it per node (it
splits the limit over the nodes the model runs on; with N processes a model may
take up to N times its limit, so the operator divides it by N).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from memory_plugin.errors import InvalidArgument
from memory_plugin.ml.connectors import trusted
from memory_plugin.ml.errors import StatusError

NANOS_PER_UNIT = {
    "NANOSECONDS": 1,
    "MICROSECONDS": 1_000,
    "MILLISECONDS": 1_000_000,
    "SECONDS": 1_000_000_000,
    "MINUTES": 60_000_000_000,
    "HOURS": 3_600_000_000_000,
    "DAYS": 86_400_000_000_000,
}
#: Buckets one process keeps; the least recently used is forgotten (it starts full again when next used).
MAX_BUCKETS = 4096


class TokenBucket:
    """OpenSearch's ``TokenBucket``: ``rate`` tokens a nanosecond, at most ``burst``, starting full."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], int]) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self._clock = clock
        self._at = clock()

    def request(self) -> bool:
        now = self._clock()
        tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
        if tokens < 1:
            return False
        self.tokens, self._at = tokens - 1, now
        return True


class RateLimiters:
    """The token bucket of each rate-limited model (``MLModelManager.createTokenBucket`` on one node)."""

    def __init__(self, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._clock = clock
        self._buckets: OrderedDict[tuple[str, str, str], TokenBucket] = OrderedDict()

    def take(self, model_key: str, limiter: Mapping[str, str]) -> None:
        """One call of the model: ml-commons' 429 when its bucket is empty."""
        key = (model_key, limiter["limit"], limiter["unit"])  # a changed limiter starts a new bucket
        bucket = self._buckets.get(key)
        if bucket is None:
            limit = float(limiter["limit"])
            bucket = TokenBucket(limit / NANOS_PER_UNIT[limiter["unit"]], max(limit, 1.0), self._clock)
            self._buckets[key] = bucket
            while len(self._buckets) > MAX_BUCKETS:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(key)
        if not bucket.request():
            raise StatusError("Request is throttled at model level.", 429)


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
