"""The bridge's outbox: memory writes answer on their own commit; the index catches up in the background.

The embedder double fails on demand: these tests are about our own retry and
ordering logic, not about search quality.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from memory_plugin.app import BRIDGE, create_app
from tests.http.test_memory_v211 import assert_opensearch_error
from tests.support.bridge import indexed
from tests.support.fake_embedder import FakeEmbedder
from tests.support.polling import PATIENCE, eventually

pytestmark = pytest.mark.backends("embedded", "opensearch")

SEARCH = "/v2/ai/conversation_histories"
CONVERSATIONS = "/_plugins/_ml/memory/conversation"
MEMORIES = "/_plugins/_ml/memory"
METRICS_TOKEN = "operator-token"


class FlakyEmbedder(FakeEmbedder):
    """The deterministic double, whose passage embeddings fail while ``failing`` is set (queries always work).

    With ``gate`` set, a passage batch waits (on the embedder's thread) until the gate opens.
    """

    failing = False
    failures = 0
    gate: threading.Event | None = None
    entered = False

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        if self.gate is not None:
            self.entered = True
            self.gate.wait(PATIENCE)  # the test opens it; the bound only ends a broken test
        if self.failing:
            self.failures += 1
            raise RuntimeError("embedder down")
        return super().passage(texts)


@pytest.fixture
def flaky():
    return FlakyEmbedder.with_default_tokenizer()


@pytest.fixture
async def client(aiohttp_client, settings, flaky, alice, bob):
    bridged = settings.replace(
        bridge={"enabled": True, "retry_max_seconds": 0.2}, auth={"metrics_token": METRICS_TOKEN}
    )
    return await aiohttp_client(create_app(bridged, embedder=flaky))


async def conversation(client, caller) -> str:
    response = await client.post(CONVERSATIONS, json={"name": "c"}, headers=caller.headers)
    assert response.status == 200
    return (await response.json())["conversation_id"]


async def interaction(client, caller, conversation_id: str, text: str) -> str:
    body = {"input": text, "response": "noted"}
    response = await client.post(f"{CONVERSATIONS}/{conversation_id}", json=body, headers=caller.headers)
    assert response.status == 200, await response.text()
    return (await response.json())["interaction_id"]


async def record_ids(client, caller, q: str) -> list[str]:
    params = {"q": q, "record_type": "ai_pipeline_storage", "top_k": "100"}
    response = await client.get(SEARCH, params=params, headers=caller.headers)
    assert response.status == 200
    return sorted(hit["record_id"] for hit in (await response.json())["data"])


async def listed(client, caller, conversation_id: str) -> list[str]:
    response = await client.get(f"{CONVERSATIONS}/{conversation_id}", headers=caller.headers)
    assert response.status == 200
    return [i["interaction_id"] for i in (await response.json())["interactions"]]


async def lag(client) -> dict:
    response = await client.get("/_health")
    assert response.status == 200
    return (await response.json())["details"]["bridge"]


async def until_retried(flaky: FlakyEmbedder, times: int = 2) -> None:
    """Until the indexer has tried (and failed) at least ``times`` times."""
    await eventually(lambda: flaky.failures >= times, f"the indexer tries the embedder {times} times")


async def test_a_failing_embedder_is_retried_and_the_interaction_becomes_searchable(client, flaky, alice):
    flaky.failing = True
    conversation_id = await conversation(client, alice)
    interaction_id = await interaction(client, alice, conversation_id, "router reset button")
    assert await listed(client, alice, conversation_id) == [interaction_id]  # answered on the memory commit
    await until_retried(flaky)
    await client.server.app[BRIDGE].drain()  # the lag is read after every pass
    assert await record_ids(client, alice, "router reset button") == []
    pending = await lag(client)
    assert pending["backlog"] == 1 and pending["oldest_pending_seconds"] > 0, pending
    metrics = await client.get("/_metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert "memory_plugin_bridge_backlog 1.0" in await metrics.text()

    flaky.failing = False  # no one retries the write: the outbox does
    await indexed(client)
    assert await record_ids(client, alice, "router reset button") == [interaction_id]
    assert await lag(client) == {"backlog": 0, "oldest_pending_seconds": 0.0}
    metrics = await client.get("/_metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    text = await metrics.text()
    assert "memory_plugin_bridge_backlog 0.0" in text
    assert 'memory_plugin_bridge_entries_total{kind="index",outcome="applied"} 1.0' in text


async def test_deleting_a_conversation_with_pending_entries_leaves_no_record(client, flaky, alice):
    kept = await conversation(client, alice)
    kept_id = await interaction(client, alice, kept, "parcel delivery tomorrow")
    await indexed(client)
    doomed = await conversation(client, alice)
    flaky.failing = True
    for n in range(3):
        await interaction(client, alice, doomed, f"parcel delivery question {n}")
    await until_retried(flaky)
    response = await client.delete(f"{CONVERSATIONS}/{doomed}", headers=alice.headers)
    assert response.status == 200
    flaky.failing = False
    await indexed(client)
    assert await record_ids(client, alice, "parcel delivery") == [kept_id]


async def test_a_conversation_deleted_while_its_interaction_is_being_embedded_leaves_no_record(client, flaky, alice):
    conversation_id = await conversation(client, alice)
    flaky.gate = threading.Event()
    try:
        await interaction(client, alice, conversation_id, "invoice statement balance")
        await eventually(lambda: flaky.entered, "the indexer reads the interaction and embeds it")
        assert (await client.delete(f"{CONVERSATIONS}/{conversation_id}", headers=alice.headers)).status == 200
    finally:
        flaky.gate.set()
    await indexed(client)
    assert await record_ids(client, alice, "invoice statement balance") == []


async def test_one_organisations_backlog_does_not_hold_anothers_interaction_behind_it(client, flaky, alice, carol):
    store = client.server.app[BRIDGE].store
    flaky.gate = threading.Event()  # the indexer takes its first batch and waits: the outbox keeps the rest
    try:
        busy = await conversation(client, alice)
        backlog = await asyncio.gather(*(interaction(client, alice, busy, f"bulk note {n}") for n in range(80)))
        lone = await interaction(client, carol, await conversation(client, carol), "one lone question")
        # At most 8: even with the indexer's first batch (up to 64 of org-1's) claimed on OpenSearch, at
        # least 16 of org-1's entries, all older than org-2's, are left to be passed over for it.
        picked = await store.outbox_pending(8, time.time() + 60)
        await store.outbox_retry(picked, time.time())  # taking entries claims them (OpenSearch): give them back
    finally:
        flaky.gate.set()
    picked_ids = [entry.interaction.interaction_id for entry in picked if entry.interaction is not None]
    assert len(picked) == 8
    assert lone in picked_ids, "org-2's one entry waits behind org-1's backlog"
    # org-1's entries still come oldest first
    org_1 = [entry.entry_id for entry in picked if entry.owner.organization_id == "org-1"]
    assert len(org_1) == 7 and set(picked_ids) - {lone} <= set(backlog)
    assert [e.enqueued_at for e in picked if e.owner.organization_id == "org-1"] == sorted(
        e.enqueued_at for e in picked if e.owner.organization_id == "org-1"
    )
    await indexed(client)
    assert await record_ids(client, carol, "one lone question") == [lone]


async def test_a_deleted_conversations_records_go_through_the_outbox_too(client, alice):
    conversation_id = await conversation(client, alice)
    ids = sorted([await interaction(client, alice, conversation_id, f"billing refund {n}") for n in range(2)])
    await indexed(client)
    assert await record_ids(client, alice, "billing refund") == ids
    assert (await client.delete(f"{CONVERSATIONS}/{conversation_id}", headers=alice.headers)).status == 200
    await indexed(client)
    assert await record_ids(client, alice, "billing refund") == []


async def test_an_updated_response_is_reindexed(client, alice):
    conversation_id = await conversation(client, alice)
    interaction_id = await interaction(client, alice, conversation_id, "modem question")
    await indexed(client)
    response = await client.put(
        f"{MEMORIES}/message/{interaction_id}", json={"response": "voicemail technician"}, headers=alice.headers
    )
    assert response.status == 200, await response.text()
    await indexed(client)
    assert await record_ids(client, alice, "voicemail technician") == [interaction_id]
    hits = await client.get(
        SEARCH, params={"q": "voicemail technician", "record_type": "ai_pipeline_storage"}, headers=alice.headers
    )
    assert (await hits.json())["data"][0]["text"] == "modem question\nvoicemail technician"


TOO_LARGE = "x" * (1024 * 1024)


async def test_an_interaction_too_large_to_index_is_refused_in_memory_terms_before_anything_is_written(client, alice):
    conversation_id = await conversation(client, alice)
    response = await client.post(
        f"{CONVERSATIONS}/{conversation_id}", json={"input": "q", "response": TOO_LARGE}, headers=alice.headers
    )
    assert_opensearch_error(await response.json(), 400, "illegal_argument_exception", "[response] is too large")
    assert "records[" not in (await response.json())["error"]["reason"]
    response = await client.post(
        f"{MEMORIES}/{conversation_id}/messages", json={"input": TOO_LARGE, "response": "r"}, headers=alice.headers
    )
    assert_opensearch_error(await response.json(), 400, "illegal_argument_exception", "[input] is too large")
    assert await listed(client, alice, conversation_id) == []
    await indexed(client)
    assert await lag(client) == {"backlog": 0, "oldest_pending_seconds": 0.0}

    # An update that would make it too large is refused too, and leaves the interaction as it was.
    interaction_id = await interaction(client, alice, conversation_id, "small")
    response = await client.put(
        f"{MEMORIES}/message/{interaction_id}", json={"response": TOO_LARGE}, headers=alice.headers
    )
    assert_opensearch_error(await response.json(), 400, "illegal_argument_exception", "[response] is too large")
    stored = await client.get(f"{MEMORIES}/message/{interaction_id}", headers=alice.headers)
    assert (await stored.json())["response"] == "noted"


async def test_without_the_bridge_health_has_no_lag_and_large_interactions_are_stored(
    aiohttp_client, settings, flaky, alice
):
    client = await aiohttp_client(create_app(settings, embedder=flaky))
    health = await (await client.get("/_health")).json()
    assert health["status"] == "green" and set(health["details"]) == {"model"}, health
    conversation_id = await conversation(client, alice)
    response = await client.post(
        f"{CONVERSATIONS}/{conversation_id}", json={"input": "q", "response": TOO_LARGE}, headers=alice.headers
    )
    assert response.status == 200


@pytest.mark.backends("opensearch")
async def test_the_outbox_really_is_on_opensearch(client, alice, opensearch_nodes):  # type: ignore[no-untyped-def]
    from memory_plugin.app import BRIDGE
    from memory_plugin.memory.stores.opensearch import OpenSearchMemoryStore

    store = client.server.app[BRIDGE].store
    assert isinstance(store, OpenSearchMemoryStore) and store.outbox
    status, body = opensearch_nodes[0].request("GET", f"/{store.outbox_index}/_mapping")
    assert status == 200, body
