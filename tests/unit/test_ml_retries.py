"""ml-commons' retry policy for remote calls: which failures, how many times, how long between, and the deadline."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable

import pytest

from memory_plugin.errors import StatusError
from memory_plugin.ml.connector_requests import ClientConfig
from memory_plugin.ml.remote import Answer, DeadlinePassed, RemoteFailure, backoff_delays, with_retries


def test_backoff_delays_follow_opensearchs_backoff_policies():
    constant = ClientConfig(retry_backoff_millis=50)
    assert list(itertools.islice(backoff_delays(constant, random.Random(1)), 4)) == [50, 50, 50, 50]
    equal = ClientConfig(
        retry_backoff_millis=100, retry_timeout_seconds=1, retry_backoff_policy="exponential_equal_jitter"
    )
    delays = list(itertools.islice(backoff_delays(equal, random.Random(1)), 6))
    caps = [100, 200, 400, 800, 1000, 1000]  # doubling, capped at retry_timeout_seconds
    assert all(cap // 2 <= delay <= cap for delay, cap in zip(delays, caps, strict=True)), delays
    full = ClientConfig(retry_backoff_millis=100, retry_backoff_policy="exponential_full_jitter")
    delays = list(itertools.islice(backoff_delays(full, random.Random(1)), 5))
    assert all(1 <= delay <= 100 * 2**n for n, delay in enumerate(delays)), delays


def scripted(*outcomes: Answer | StatusError) -> tuple[list[int], Callable[[], Awaitable[Answer]]]:
    tried: list[int] = []

    async def attempt() -> Answer:
        tried.append(1)
        outcome = outcomes[min(len(tried), len(outcomes)) - 1]
        if isinstance(outcome, StatusError):
            raise outcome
        return outcome

    return tried, attempt


async def test_only_what_ml_commons_retries_is_retried_and_at_most_max_retry_times():
    far = asyncio.get_running_loop().time() + 60
    config = ClientConfig(max_retry_times=2, retry_backoff_millis=0)
    tried, attempt = scripted(Answer(503, b"busy"), RemoteFailure("no answer", 504), Answer(200, b"{}"))
    assert (await with_retries(attempt, config, far)).status == 200 and len(tried) == 3
    tried, attempt = scripted(Answer(429, b"slow"))
    with pytest.raises(RemoteFailure) as failed:
        await with_retries(attempt, config, far)
    assert failed.value.status == 429 and len(tried) == 3
    tried, attempt = scripted(Answer(404, b"gone"), Answer(200, b"{}"))
    with pytest.raises(StatusError) as failed:
        await with_retries(attempt, config, far)
    assert failed.value.status == 404 and len(tried) == 1
    tried, attempt = scripted(Answer(429, b"slow"))
    with pytest.raises(RemoteFailure):
        await with_retries(attempt, ClientConfig(), far)
    assert len(tried) == 1  # max_retry_times defaults to 0, as ml-commons'


async def test_a_retry_cut_short_by_the_deadline_answers_with_the_failure_it_retried():
    far = asyncio.get_running_loop().time() + 60
    tried, attempt = scripted(Answer(429, b"slow"), DeadlinePassed("the remote model did not answer", 504))
    config = ClientConfig(max_retry_times=-1, retry_backoff_millis=0)
    with pytest.raises(RemoteFailure) as failed:
        await with_retries(attempt, config, far)
    assert failed.value.status == 429 and len(tried) == 2
    # no retry starts when its backoff would end past the deadline
    tried, attempt = scripted(Answer(429, b"slow"), Answer(200, b"{}"))
    soon = asyncio.get_running_loop().time() + 5
    with pytest.raises(RemoteFailure):
        await with_retries(attempt, ClientConfig(max_retry_times=3, retry_backoff_millis=10_000), soon)
    assert len(tried) == 1
