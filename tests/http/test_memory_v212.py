"""The 2.12+ memory API, driven by opensearch-py's real ``plugins.ml`` client over a socket.

On each backend: embedded, the app in a thread with the embedder double; on OpenSearch, a live server
process whose TOML config puts the home region on a real node."""

from __future__ import annotations

import uuid

import pytest
from opensearchpy import AsyncOpenSearch, NotFoundError, RequestError

from memory_plugin.auth import KeyStore
from tests.support.live import app_in_thread_with_key, live_server_with_key

pytestmark = pytest.mark.backends("embedded", "opensearch")


@pytest.fixture(scope="module")
def server(tmp_path_factory, fake_embedder, backend, request):
    if backend == "opensearch":
        nodes = request.getfixturevalue("opensearch_nodes")
        base = tmp_path_factory.mktemp("v212-opensearch")
        prefix = f"mp-mem-{uuid.uuid4().hex[:12]}"
        config = base / "memory-plugin.toml"
        config.write_text(
            f'[regions.USA]\nstore = "opensearch"\nhosts = ["{nodes[0].url}"]\nindex_prefix = "{prefix}"\n'
        )
        live = live_server_with_key(base / "data", config=config)
        _, live.other_token = KeyStore(live.data_dir / "keys.json").create("org-1", "bob")
        live.index_prefix = prefix
        yield live
        live.kill()
        nodes[0].request("DELETE", f"/{prefix}-*")
        return
    with app_in_thread_with_key(tmp_path_factory.mktemp("v212") / "data", fake_embedder) as app:
        _, app.other_token = KeyStore(app.data_dir / "keys.json").create("org-1", "bob")
        yield app


@pytest.fixture
async def ml(server):
    client = AsyncOpenSearch(hosts=[server.url], headers=server.headers)
    yield client.plugins.ml
    await client.close()


@pytest.fixture
async def other_ml(server):
    client = AsyncOpenSearch(hosts=[server.url], headers={"Authorization": f"Bearer {server.other_token}"})
    yield client.plugins.ml
    await client.close()


async def test_every_client_method_on_one_memory(ml):
    memory_id = (await ml.create_memory(body={"name": "Support chat about routers"}))["memory_id"]
    created = await ml.get_memory(memory_id=memory_id)
    assert created["memory_id"] == memory_id and created["name"] == "Support chat about routers"
    assert created["create_time"] == created["updated_time"]

    message_ids = []
    for n, (question, answer) in enumerate(
        [
            ("How do I reset my router?", "Hold the reset button."),
            ("Is the light red?", "Yes"),
            ("Then what?", "Call us"),
        ]
    ):
        body = {"input": question, "response": answer, "origin": "assistant", "additional_info": {"turn": str(n)}}
        message_ids.append((await ml.create_message(memory_id=memory_id, body=body))["message_id"])

    after = await ml.get_memory(memory_id=memory_id)
    assert after["updated_time"] > created["updated_time"], "a new message moves updated_time"

    messages = (await ml.get_all_messages(memory_id=memory_id))["messages"]
    assert [m["message_id"] for m in messages] == message_ids, "messages oldest first, as 2.12+ lists them"
    assert messages[0]["input"] == "How do I reset my router?"
    assert messages[0]["additional_info"] == {"turn": "0"}
    assert messages[0]["memory_id"] == memory_id

    paged = await ml.get_all_messages(memory_id=memory_id, params={"max_results": 2})
    assert [m["message_id"] for m in paged["messages"]] == message_ids[:2] and paged["next_token"] == 2

    parent = message_ids[0]
    trace_ids = [
        (
            await ml.create_message(
                memory_id=memory_id,
                body={
                    "input": f"tool call {n}",
                    "response": f"tool result {n}",
                    "origin": "tool",
                    "parent_message_id": parent,
                    "trace_number": n,
                },
            )
        )["message_id"]
        for n in (1, 2)
    ]
    traces = (await ml.get_message_traces(message_id=parent))["traces"]
    assert [t["message_id"] for t in traces] == trace_ids
    assert [t["trace_number"] for t in traces] == [1, 2]
    assert all(t["parent_message_id"] == parent for t in traces)
    assert [m["message_id"] for m in (await ml.get_all_messages(memory_id=memory_id))["messages"]] == message_ids

    message = await ml.get_message(message_id=message_ids[1])
    assert message["response"] == "Yes"
    updated = await ml.update_message(message_id=message_ids[1], body={"response": "Yes, blinking red"})
    assert updated["_id"] == message_ids[1] and updated["result"] == "updated"
    assert (await ml.get_message(message_id=message_ids[1]))["response"] == "Yes, blinking red"

    await ml.update_memory(memory_id=memory_id, body={"name": "Router reset", "additional_info": {"tier": "gold"}})
    renamed = await ml.get_memory(memory_id=memory_id)
    assert renamed["name"] == "Router reset" and renamed["additional_info"] == {"tier": "gold"}

    listing = await ml.get_all_memories()
    assert listing["memories"][0]["memory_id"] == memory_id, "the last updated memory comes first"

    found = await ml.search_memory(body={"query": {"match": {"name": "router"}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == [memory_id]
    assert found["hits"]["total"]["value"] == 1
    assert found["hits"]["hits"][0]["_source"]["name"] == "Router reset"

    by_content = await ml.search_message(memory_id=memory_id, body={"query": {"match": {"response": "blinking"}}})
    assert [hit["_id"] for hit in by_content["hits"]["hits"]] == [message_ids[1]]

    assert await ml.delete_memory(memory_id=memory_id) == {"success": True}
    for call in (
        ml.get_memory(memory_id=memory_id),
        ml.get_all_messages(memory_id=memory_id),
        ml.create_message(memory_id=memory_id, body={"input": "x"}),
        ml.update_memory(memory_id=memory_id, body={"name": "x"}),
        ml.search_message(memory_id=memory_id, body={"query": {"match_all": {}}}),
        ml.delete_memory(memory_id=memory_id),
        ml.get_message(message_id=message_ids[0]),
        ml.update_message(message_id=message_ids[0], body={"response": "x"}),
        ml.get_message_traces(message_id=parent),
    ):
        with pytest.raises(NotFoundError):
            await call
    assert memory_id not in [m["memory_id"] for m in (await ml.get_all_memories())["memories"]]


async def test_memory_search_combines_bool_terms_range_sort_and_paging(ml):
    ids = [(await ml.create_memory(body={"name": f"topic {n}"}))["memory_id"] for n in range(5)]
    body = {
        "query": {
            "bool": {
                "must": [{"match": {"name": "topic"}}],
                "must_not": [{"match_phrase": {"name": "topic 0"}}],  # name is text: a term would be one token
                "filter": [{"range": {"create_time": {"gte": "2000-01-01T00:00:00Z"}}}],
            }
        },
        "sort": [{"create_time": "asc"}],
        "from": 1,
        "size": 2,
    }
    result = await ml.search_memory(body=body)
    hits = [hit["_id"] for hit in result["hits"]["hits"]]
    assert hits == ids[2:4]
    assert result["hits"]["total"]["value"] >= 4


async def test_2_11_and_2_12_are_views_of_the_same_data(server, ml):
    client = AsyncOpenSearch(hosts=[server.url], headers=server.headers)
    try:
        old = await client.transport.perform_request("POST", "/_plugins/_ml/memory/conversation", body={"name": "old"})
        conversation_id = old["conversation_id"]
        interaction = await client.transport.perform_request(
            "POST",
            f"/_plugins/_ml/memory/conversation/{conversation_id}",
            body={"input": "q", "response": "a", "additional_info": "raw"},
        )
        assert conversation_id in [
            m["memory_id"] for m in (await ml.get_all_memories(params={"max_results": 1000}))["memories"]
        ]
        assert (await ml.get_memory(memory_id=conversation_id))["name"] == "old"
        (message,) = (await ml.get_all_messages(memory_id=conversation_id))["messages"]
        assert message["message_id"] == interaction["interaction_id"] and message["input"] == "q"
        assert await ml.delete_memory(memory_id=conversation_id) == {"success": True}
        with pytest.raises(NotFoundError):
            await client.transport.perform_request("GET", f"/_plugins/_ml/memory/conversation/{conversation_id}")

        memory_id = (await ml.create_memory(body={"name": "new"}))["memory_id"]
        await ml.create_message(
            memory_id=memory_id, body={"input": "q2", "response": "a2", "additional_info": {"k": "v"}}
        )
        listing = await client.transport.perform_request(
            "GET", "/_plugins/_ml/memory/conversation", params={"max_results": 1000}
        )
        assert memory_id in [c["conversation_id"] for c in listing["conversations"]]
        (old_view,) = (await client.transport.perform_request("GET", f"/_plugins/_ml/memory/conversation/{memory_id}"))[
            "interactions"
        ]
        assert old_view["input"] == "q2" and old_view["additional_info"] == '{"k": "v"}'
        assert await client.transport.perform_request("DELETE", f"/_plugins/_ml/memory/conversation/{memory_id}") == {
            "success": True
        }
        with pytest.raises(NotFoundError):
            await ml.get_memory(memory_id=memory_id)
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda ml, m, msg: ml.update_memory(memory_id=m, body={"additional_info": ["x"]}), "flat_object"),
        (lambda ml, m, msg: ml.update_memory(memory_id=m, body={"name": 5}), "[name] must be a string"),
        (lambda ml, m, msg: ml.update_message(message_id=msg, body={"response": None}), "must not be null"),
        (lambda ml, m, msg: ml.search_memory(body={"query": {"match_all": {}}, "size": 10001}), "10000"),
        (lambda ml, m, msg: ml.create_message(memory_id=m, body={}), "At least one of the following parameters"),
        (lambda ml, m, msg: ml.create_message(memory_id=m, body={"input": None}), "[input] must be a string"),
        (lambda ml, m, msg: ml.create_memory(body={"name": 5}), "java.lang.Integer cannot be cast"),
    ],
)
async def test_bad_input_is_400_in_opensearch_format(ml, call, fragment):
    memory_id = (await ml.create_memory(body={"name": "bad input"}))["memory_id"]
    message_id = (await ml.create_message(memory_id=memory_id, body={"input": "q", "response": "a"}))["message_id"]
    with pytest.raises(RequestError) as raised:
        await call(ml, memory_id, message_id)
    assert raised.value.status_code == 400
    error = raised.value.info["error"]
    # OpenSearch words a search failure "all shards failed" and gives the cause under root_cause.
    assert fragment in error["reason"] or fragment in error["root_cause"][0]["reason"], error


async def test_updates_keep_what_the_real_node_keeps(ml):
    """ml-commons ignores fields it does not update and merges maps; the real node proved the old 400s wrong."""
    memory_id = (await ml.create_memory(body={"name": "kept", "additional_info": {"a": "1"}}))["memory_id"]
    message_id = (await ml.create_message(memory_id=memory_id, body={"input": "q", "response": "a"}))["message_id"]
    ignored = await ml.update_memory(memory_id=memory_id, body={"user": "mallory", "additional_info": {"b": 2}})
    assert ignored["result"] == "updated" and ignored["_version"] == 3  # created, a message added, this update
    memory = await ml.get_memory(memory_id=memory_id)
    assert memory["additional_info"] == {"a": "1", "b": 2} and memory.get("user") != "mallory"
    noop = await ml.update_message(message_id=message_id, body={"input": "rewritten"})
    assert noop["result"] == "noop" and noop["_shards"]["total"] == 0
    assert (await ml.get_message(message_id=message_id))["input"] == "q"
    coerced = await ml.create_message(memory_id=memory_id, body={"input": 1.50, "additional_info": {"n": 2, "t": True}})
    message = await ml.get_message(message_id=coerced["message_id"])
    assert message["input"] == "1.5" and message["additional_info"] == {"n": "2", "t": "true"}
    assert (await ml.update_memory(memory_id=memory_id, body={}))["result"] == "updated"


async def test_another_principal_sees_nothing(ml, other_ml):
    memory_id = (await ml.create_memory(body={"name": "secret plans"}))["memory_id"]
    message_id = (await ml.create_message(memory_id=memory_id, body={"input": "secret", "response": "plans"}))[
        "message_id"
    ]
    for call in (
        other_ml.get_memory(memory_id=memory_id),
        other_ml.get_all_messages(memory_id=memory_id),
        other_ml.create_message(memory_id=memory_id, body={"input": "x"}),
        other_ml.update_memory(memory_id=memory_id, body={"name": "pwned"}),
        other_ml.delete_memory(memory_id=memory_id),
        other_ml.get_message(message_id=message_id),
        other_ml.update_message(message_id=message_id, body={"response": "pwned"}),
        other_ml.get_message_traces(message_id=message_id),
        other_ml.search_message(memory_id=memory_id, body={"query": {"match_all": {}}}),
    ):
        with pytest.raises(NotFoundError):
            await call
    for body in (
        {"query": {"match_all": {}}},
        {"query": {"term": {"user": "alice"}}},
        {"query": {"ids": {"values": [memory_id]}}},
        {"query": {"bool": {"should": [{"match_all": {}}, {"term": {"_id": memory_id}}]}}},
    ):
        hits = (await other_ml.search_memory(body=body))["hits"]["hits"]
        assert memory_id not in [hit["_id"] for hit in hits]
    assert memory_id not in [m["memory_id"] for m in (await other_ml.get_all_memories())["memories"]]
    assert (await ml.get_memory(memory_id=memory_id))["name"] == "secret plans"


@pytest.mark.backends("opensearch")
async def test_live_server_keeps_memory_in_opensearch(server, ml, opensearch_nodes):  # type: ignore[no-untyped-def]
    memory_id = (await ml.create_memory(body={"name": "kept in OpenSearch"}))["memory_id"]
    message_id = (await ml.create_message(memory_id=memory_id, body={"input": "q", "additional_info": {"k": "v"}}))[
        "message_id"
    ]
    status, meta = opensearch_nodes[0].request("GET", f"/{server.index_prefix}-memory-meta/_doc/{memory_id}")
    assert status == 200 and meta["_source"]["name"] == "kept in OpenSearch", meta
    status, message = opensearch_nodes[0].request("GET", f"/{server.index_prefix}-memory-message/_doc/{message_id}")
    assert status == 200 and message["_source"]["additional_info"] == {"k": "v"}, message
    assert not (server.data_dir / "memory.sqlite3").exists()
