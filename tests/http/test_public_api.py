"""The public in-process API: only top-level names, no socket, same answers as HTTP."""

from __future__ import annotations

import gc
import warnings
from datetime import UTC, datetime

import pytest
from aiohttp import web

from memory_plugin import (
    InvalidArgument,
    MemoryPlugin,
    NotFound,
    Principal,
    ValidationFailed,
    create_app,
)

# About search quality: the real model (tests/http/conftest.py).
pytestmark = pytest.mark.model

ALICE = Principal("org-1", "alice")
BOB = Principal("org-1", "bob")


@pytest.fixture
async def mp(settings, embedder):
    async with MemoryPlugin.open(settings.replace(bridge={"enabled": True}), embedder=embedder) as plugin:
        yield plugin


async def test_every_operation_in_process(mp):
    conversation = await mp.create_conversation(ALICE, "Billing", {"channel": "chat"})
    first = await mp.add_interaction(
        ALICE,
        conversation.conversation_id,
        input="Why was I charged twice?",
        response="A duplicate authorisation; it drops in three days.",
        origin="bot",
    )
    second = await mp.add_interaction(ALICE, conversation.conversation_id, input="Thanks", response="You're welcome")
    page = await mp.list_interactions(ALICE, conversation.conversation_id)
    assert [i.interaction_id for i in page.items] == [second.interaction_id, first.interaction_id]
    assert page.next_token is None
    assert (await mp.get_conversation(ALICE, conversation.conversation_id)).name == "Billing"
    updated = await mp.update_conversation(ALICE, conversation.conversation_id, name="Billing (resolved)")
    assert updated.name == "Billing (resolved)" and updated.additional_info == {"channel": "chat"}
    listing = await mp.list_conversations(ALICE, max_results=1)
    assert [c.conversation_id for c in listing.items] == [conversation.conversation_id] and listing.next_token == 1

    await mp.indexed()  # the bridge indexes interactions in the background
    found = await mp.search(ALICE, "charged twice", "ai_pipeline_storage")
    # the reply that followed it is embedded after it, so it may be found by it too
    assert first.interaction_id in [hit.record.record_id for hit in found.hits[:2]]

    ingested = await mp.ingest(
        ALICE,
        [
            {
                "record_id": "call-1",
                "record_type": "voice",
                "region": "DEU",
                "text": "Der Router startet ständig neu.",
                "record_created_at": "2026-03-01T10:00:00Z",
                "metadata": {"language": "de", "minutes": 12},
            },
            {
                "record_id": "call-2",
                "record_type": "voice",
                "text": "The router keeps rebooting every hour.",
                "metadata": {"language": "en", "minutes": 3},
            },
        ],
    )
    assert [(r.record_id, r.region, r.chunk_total) for r in ingested] == [("call-1", "DEU", 1), ("call-2", "USA", 1)]
    german = await mp.search(ALICE, "router reboots", "voice", filters={"language": "de"})
    assert [h.record.record_id for h in german.hits] == ["call-1"]
    long_calls = await mp.search(ALICE, "router reboots", "voice", filters={"minutes": {"gte": 10}})
    assert [h.record.record_id for h in long_calls.hits] == ["call-1"]
    early = await mp.search(
        ALICE, "router", "voice", filters={"record_created_at": {"lt": datetime(2026, 6, 1, tzinfo=UTC)}}
    )
    assert [h.record.record_id for h in early.hits] == ["call-1"]
    regions = await mp.search(ALICE, "router", "voice", filters={"region": {"in": ["USA", "AUS"]}})
    assert [h.record.record_id for h in regions.hits] == ["call-2"]

    assert await mp.delete_record(ALICE, "call-2") == 1
    erased = await mp.erase_user(Principal("org-1"), "alice")
    assert erased.records == 3  # call-1 and the two bridged interactions
    assert (erased.memories, erased.messages) == (1, 2)  # the erasure takes her memory too
    with pytest.raises(NotFound):
        await mp.delete_conversation(ALICE, conversation.conversation_id)
    with pytest.raises(NotFound):
        await mp.get_conversation(ALICE, conversation.conversation_id)


async def test_same_rules_and_typed_errors_as_http(mp):
    conversation = await mp.create_conversation(ALICE)
    with pytest.raises(NotFound):
        await mp.list_interactions(BOB, conversation.conversation_id)
    with pytest.raises(ValidationFailed) as paging:
        await mp.list_conversations(ALICE, max_results=0)
    assert paging.value.status == 400 and paging.value.parameter == "max_results"
    with pytest.raises(InvalidArgument) as top_k:
        await mp.search(ALICE, "x", "voice", top_k=101)
    assert top_k.value.parameter == "top_k"
    with pytest.raises(InvalidArgument) as operator:
        await mp.search(ALICE, "x", "voice", filters={"user_id": {"near": "a"}})
    assert operator.value.parameter == "filter[user_id][near]"
    with pytest.raises(InvalidArgument) as record:
        await mp.ingest(ALICE, [{"record_type": "voice", "text": ""}])
    assert record.value.parameter == "records[0].text"


async def test_results_match_http_on_the_same_data(aiohttp_client, settings, embedder, admin):
    async with MemoryPlugin.open(settings, embedder=embedder) as mp:
        await mp.ingest(
            Principal("org-1"),
            [
                {"record_id": f"r{n}", "record_type": "message", "text": text}
                for n, text in enumerate(
                    ["refund for a broken kettle", "password reset link expired", "kettle arrived broken"]
                )
            ],
        )
        direct = await mp.search(Principal("org-1"), "broken kettle", "message")
    client = await aiohttp_client(create_app(settings, embedder=embedder))
    response = await client.get(
        "/v2/ai/conversation_histories", params={"q": "broken kettle", "record_type": "message"}, headers=admin.headers
    )
    over_http = (await response.json())["data"]
    assert [(h.record.record_id, round(h.score, 6)) for h in direct.hits] == [
        (i["record_id"], i["score"]) for i in over_http
    ]


async def test_mounted_under_a_prefix_beside_the_hosts_routes(aiohttp_client, settings, embedder, alice):
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"host": "ok"})

    host = web.Application()
    host.router.add_get("/hello", hello)
    plugin = create_app(settings, embedder=embedder)
    host.add_subapp("/memory", plugin)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        client = await aiohttp_client(host)
        assert await (await client.get("/hello")).json() == {"host": "ok"}
        assert (await client.get("/memory/_health")).status == 200
        console = await client.get("/memory/_console")  # its relative links resolve under the prefix
        assert console.status == 200 and 'src="_console/console.js"' in await console.text()
        assert (await client.get("/memory/_console/console.js")).status == 200
        assert (await client.get("/memory/_plugins/_ml/memory/conversation")).status == 401
        created = await client.post(
            "/memory/_plugins/_ml/memory/conversation", json={"name": "x"}, headers=alice.headers
        )
        assert created.status == 200
        bad = await client.get(
            "/memory/v2/ai/conversation_histories",
            params={"q": "x", "record_type": "voice", "top_k": "0"},
            headers=alice.headers,
        )
        assert bad.status == 400 and "errors" in await bad.json()
        from memory_plugin.memory.routes_v211 import MEMORY

        memory_store = plugin[MEMORY].store
        await client.close()
        gc.collect()
    assert not memory_store.db.is_open, "the host's shutdown closed the plugin's stores"
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]
