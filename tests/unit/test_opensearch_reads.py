"""A single-document read while the index's shard is still starting waits for it, a few seconds at most."""

from __future__ import annotations

from typing import Any

import pytest
from opensearchpy.exceptions import TransportError

from memory_plugin import opensearch_client
from memory_plugin.opensearch_client import get_document

STARTING = TransportError(503, "no_shard_available_action_exception", "CurrentState[RECOVERING]")


class Shard:
    """A client whose GETs fail with ``errors`` first, then find the document."""

    def __init__(self, *errors: TransportError) -> None:
        self.errors = list(errors)
        self.gets = 0

    async def get(self, index: str, id: str) -> dict[str, Any]:  # noqa: A002 - opensearch-py's name
        self.gets += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"_id": id, "found": True, "_source": {}}


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opensearch_client, "_SHARD_STARTING_PAUSES", (0.0, 0.0, 0.0))


async def test_a_shard_still_starting_is_waited_for() -> None:
    client = Shard(STARTING, STARTING)
    found = await get_document(client, "index", "doc")  # type: ignore[arg-type]
    assert found is not None and found["_id"] == "doc" and client.gets == 3


async def test_it_is_waited_for_a_bounded_time_and_other_failures_are_not_retried() -> None:
    client = Shard(*[STARTING] * 4)
    with pytest.raises(TransportError):
        await get_document(client, "index", "doc")  # type: ignore[arg-type]
    assert client.gets == 4  # three pauses, then the error
    client = Shard(TransportError(503, "cluster_block_exception", "read-only"))
    with pytest.raises(TransportError):
        await get_document(client, "index", "doc")  # type: ignore[arg-type]
    assert client.gets == 1
