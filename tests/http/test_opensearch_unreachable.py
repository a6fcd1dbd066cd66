"""A cluster that does not answer is a 503 the caller may retry, in the API's own format, not a 500 that reads
as a bug (the stores on OpenSearch raise opensearch-py's connection errors from any request)."""

from __future__ import annotations

import pytest
from opensearchpy.exceptions import ConnectionError, ConnectionTimeout

from memory_plugin.memory.service import MemoryService


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (ConnectionTimeout("TIMEOUT", "timed out", TimeoutError()), "did not answer in time"),
        (ConnectionError("N/A", "refused", OSError()), "connection to the OpenSearch cluster failed"),
    ],
)
async def test_a_cluster_that_does_not_answer_is_a_503(client, alice, monkeypatch, error, words):
    async def unreachable(*args, **kwargs):
        raise error

    monkeypatch.setattr(MemoryService, "get_conversation", unreachable)
    response = await client.get("/_plugins/_ml/memory/abc", headers=alice.headers)
    body = await response.json()
    assert response.status == 503, body
    assert body["status"] == 503 and words in body["error"]["reason"], body


async def test_other_failures_stay_internal_errors(client, alice, monkeypatch):
    async def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(MemoryService, "get_conversation", broken)
    response = await client.get("/_plugins/_ml/memory/abc", headers=alice.headers)
    assert response.status == 500
