"""The erasure scenario, shared by the SQLite (tests/http) and OpenSearch (tests/opensearch) memory stores."""

from __future__ import annotations

from typing import Any

MEMORY = "/_plugins/_ml/memory"
HISTORIES = "/v2/ai/conversation_histories"
CONTAINERS = "/_plugins/_ml/memory_containers"
NOTHING = {
    "deleted_records": 0,
    "deleted_chunks": 0,
    "deleted_memories": 0,
    "deleted_messages": 0,
    "deleted_memory_containers": 0,
    "deleted_ml_documents": 0,
}


async def memory_with_messages(client, caller, name: str, messages: int, traces: int = 0) -> str:
    """A memory of ``caller`` with ``messages`` messages, the first carrying ``traces`` traces."""
    response = await client.post(MEMORY, json={"name": name}, headers=caller.headers)
    assert response.status == 200, await response.text()
    memory_id = str((await response.json())["memory_id"])
    first = None
    for n in range(messages):
        body = {"input": f"{name} question {n}", "response": f"{name} answer {n}"}
        response = await client.post(f"{MEMORY}/{memory_id}/messages", json=body, headers=caller.headers)
        assert response.status == 200, await response.text()
        first = first or (await response.json())["message_id"]
    for n in range(traces):
        body = {"input": f"{name} tool call {n}", "parent_message_id": first, "trace_number": n + 1}
        response = await client.post(f"{MEMORY}/{memory_id}/messages", json=body, headers=caller.headers)
        assert response.status == 200, await response.text()
    return memory_id


async def agentic_container(client, caller, name: str) -> str:
    """An agentic memory container of ``caller`` holding one working memory."""
    response = await client.post(f"{CONTAINERS}/_create", json={"name": name}, headers=caller.headers)
    assert response.status == 200, await response.text()
    container_id = str((await response.json())["memory_container_id"])
    messages = [{"role": "user", "content": [{"type": "text", "text": f"{name} says hello"}]}]
    body = {"messages": messages, "namespace": {"user_id": name}}
    response = await client.post(f"{CONTAINERS}/{container_id}/memories", json=body, headers=caller.headers)
    assert response.status == 200, await response.text()
    return container_id


async def working_memories(client, caller, container_id: str) -> int | None:
    """How many working memories ``caller`` sees in the container; None when it is gone (404)."""
    body = {"query": {"match_all": {}}}
    path = f"{CONTAINERS}/{container_id}/memories/working/_search"
    response = await client.post(path, json=body, headers=caller.headers)
    if response.status == 404:
        return None
    assert response.status == 200, await response.text()
    return int((await response.json())["hits"]["total"]["value"])


async def record(client, caller, record_id: str, user_id: str | None) -> None:
    body: dict[str, Any] = {"record_id": record_id, "record_type": "voice", "text": f"call {record_id}"}
    if user_id is not None:
        body["user_id"] = user_id
    response = await client.post(HISTORIES, json={"records": [body]}, headers=caller.headers)
    assert response.status == 201, await response.text()


async def erase(client, caller, **filters: str) -> tuple[int, dict[str, Any]]:
    response = await client.delete(HISTORIES, params=filters, headers=caller.headers)
    return response.status, await response.json()


async def messages_of(client, caller, memory_id: str) -> int | None:
    """How many messages ``caller`` sees in the memory; None when it is gone (404)."""
    response = await client.get(f"{MEMORY}/{memory_id}/messages", headers=caller.headers)
    if response.status == 404:
        return None
    assert response.status == 200, await response.text()
    return len((await response.json())["messages"])


async def record_ids(client, admin) -> list[str]:
    params = {"q": "call", "record_type": "voice", "top_k": "100"}
    response = await client.get(HISTORIES, params=params, headers=admin.headers)
    body = await response.json()
    assert response.status == 200 and "failed_regions" not in body["meta"], body
    return sorted(hit["record_id"] for hit in body["data"])


async def erasure_scenario(client, admin, alice, bob, alice_elsewhere) -> None:
    """Erasing alice (an organisation key) takes her records, her memory and her agentic memory containers,
    and nobody else's.

    ``alice_elsewhere`` is a user named alice in another organisation.
    """
    alices = await memory_with_messages(client, alice, "alice-chat", messages=2, traces=1)
    alices_second = await memory_with_messages(client, alice, "alice-empty", messages=0)
    bobs = await memory_with_messages(client, bob, "bob-chat", messages=1)
    foreign = await memory_with_messages(client, alice_elsewhere, "other-org-alice", messages=1)
    alices_agents = [await agentic_container(client, alice, name) for name in ("alice-agent", "alice-other-agent")]
    bobs_agent = await agentic_container(client, bob, "bob-agent")
    foreign_agent = await agentic_container(client, alice_elsewhere, "other-org-alice-agent")
    await record(client, admin, "alice-call", "alice")
    await record(client, admin, "bob-call", "bob")

    # Not an erasure: a filter on more than user_id deletes records only.
    status, body = await erase(client, admin, **{"filter[user_id]": "alice", "filter[record_type]": "message"})
    assert status == 200, body
    assert body["data"] == NOTHING
    assert await messages_of(client, alice, alices) == 2
    assert await working_memories(client, alice, alices_agents[0]) == 1

    # A user's key may only erase itself: bob's memory is out of alice's reach.
    status, body = await erase(client, alice, **{"filter[user_id]": "bob"})
    assert status == 200, body
    assert body["data"] == NOTHING
    assert await messages_of(client, bob, bobs) == 1
    assert await working_memories(client, bob, bobs_agent) == 1

    status, body = await erase(client, admin, **{"filter[user_id]": "alice"})
    assert status == 200, body
    # Two memories; two messages and one trace; two containers.
    assert body["data"] == {
        "deleted_records": 1,
        "deleted_chunks": 1,
        "deleted_memories": 2,
        "deleted_messages": 3,
        "deleted_memory_containers": 2,
        "deleted_ml_documents": 0,
    }
    assert await messages_of(client, alice, alices) is None
    assert await messages_of(client, alice, alices_second) is None
    response = await client.get(MEMORY, headers=alice.headers)
    assert response.status == 200 and (await response.json())["memories"] == [], await response.text()
    # Nothing else went.
    assert await messages_of(client, bob, bobs) == 1
    assert await messages_of(client, alice_elsewhere, foreign) == 1
    assert await record_ids(client, admin) == ["bob-call"]
    assert [await working_memories(client, alice, agent) for agent in alices_agents] == [None, None]
    response = await client.post(f"{CONTAINERS}/_search", json={"query": {"match_all": {}}}, headers=alice.headers)
    assert (await response.json())["hits"]["hits"] == [], await response.text()
    assert await working_memories(client, bob, bobs_agent) == 1
    assert await working_memories(client, alice_elsewhere, foreign_agent) == 1

    # Erasing again finds nothing; a user's key erases itself.
    status, body = await erase(client, admin, **{"filter[user_id]": "alice"})
    assert body["data"] == NOTHING
    status, body = await erase(client, bob, **{"filter[user_id]": "bob"})
    assert status == 200, body
    assert body["data"] == {
        "deleted_records": 1,
        "deleted_chunks": 1,
        "deleted_memories": 1,
        "deleted_messages": 1,
        "deleted_memory_containers": 1,
        "deleted_ml_documents": 0,
    }
    assert await messages_of(client, bob, bobs) is None
    assert await working_memories(client, bob, bobs_agent) is None
    assert await messages_of(client, alice_elsewhere, foreign) == 1
    assert await working_memories(client, alice_elsewhere, foreign_agent) == 1
