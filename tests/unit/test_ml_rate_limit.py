"""A model's rate limiter: OpenSearch's token bucket, kept in the ml store so that every process shares it."""

from __future__ import annotations

import pytest

from memory_plugin.auth import Principal
from memory_plugin.errors import StatusError
from memory_plugin.ml.guards import RateLimiters
from memory_plugin.ml.stores.sqlite import SqliteMLStore

OWNER = Principal("org-1", "alice")
SECOND = 1_000_000_000


async def test_the_bucket_starts_full_refills_at_the_limits_rate_and_refuses_below_one_token(tmp_path):
    store = SqliteMLStore(tmp_path / "ml.sqlite3")
    await store.open()
    try:
        now = [1_000 * SECOND]
        limiters = RateLimiters(store, clock=lambda: now[0])
        two_a_second = {"limit": "2", "unit": "SECONDS"}
        await limiters.take(OWNER, "m", two_a_second)
        await limiters.take(OWNER, "m", two_a_second)  # a burst of the whole limit
        with pytest.raises(StatusError) as refused:
            await limiters.take(OWNER, "m", two_a_second)
        assert refused.value.status == 429 and str(refused.value) == "Request is throttled at model level."
        now[0] += SECOND * 6 // 10  # past half a second: one token back
        await limiters.take(OWNER, "m", two_a_second)
        with pytest.raises(StatusError):
            await limiters.take(OWNER, "m", two_a_second)
        now[0] -= 10 * SECOND  # another process's clock behind this one's adds no tokens
        with pytest.raises(StatusError):
            await limiters.take(OWNER, "m", two_a_second)
        # another model and a changed limiter each have a full bucket of their own (model ids are unique)
        await limiters.take(OWNER, "other", two_a_second)
        await limiters.take(OWNER, "m", {"limit": "1", "unit": "HOURS"})
        with pytest.raises(StatusError):
            await limiters.take(OWNER, "m", {"limit": "1", "unit": "HOURS"})
        # a fractional limit still lets one call through (ml-commons: at least one token of burst)
        await limiters.take(OWNER, "slow", {"limit": "0.5", "unit": "MINUTES"})
        await limiters.forget(OWNER, "m")
        assert await store.get("rate_limit", OWNER, "m") is None
    finally:
        await store.close()
