"""Kept pages of messages: a page is served again only while its conversation is unchanged.

Every write that can change a list (a message, a trace, an update, a delete, an
erasure) must be seen by the next read, and a kept page must never reach
another caller, another form of the API or another window.  On both backends: on
OpenSearch the version is the memory document's, read from the node
(``tests/opensearch/test_memory_opensearch.py`` moves it from another process).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory_plugin.app import create_app
from memory_plugin.auth import KeyStore
from memory_plugin.memory.routes_v211 import MEMORY, MESSAGE_PAGES
from tests.conftest import Caller, make_caller

V211 = "/_plugins/_ml/memory/conversation"
V212 = "/_plugins/_ml/memory"
HISTORIES = "/v2/ai/conversation_histories"

pytestmark = pytest.mark.backends("embedded", "opensearch")


async def _json(response: Any, status: int = 200) -> Any:
    assert response.status == status, await response.text()
    return await response.json()


async def _memory(client: Any, caller: Caller, messages: int = 0) -> str:
    memory_id = (await _json(await client.post(V212, json={"name": "kept"}, headers=caller.headers)))["memory_id"]
    for n in range(messages):
        await _message(client, caller, memory_id, f"q{n}", f"a{n}")
    return str(memory_id)


async def _message(client: Any, caller: Caller, memory_id: str, question: str, answer: str) -> str:
    body = {"input": question, "response": answer}
    created = await _json(await client.post(f"{V212}/{memory_id}/messages", json=body, headers=caller.headers))
    return str(created["message_id"])


async def _inputs(client: Any, caller: Caller, memory_id: str, **params: Any) -> list[str]:
    """The 2.12 page (oldest first), read twice: the second read is the kept page, and must agree."""
    url = f"{V212}/{memory_id}/messages"
    first = await _json(await client.get(url, params=params, headers=caller.headers))
    again = await _json(await client.get(url, params=params, headers=caller.headers))
    assert again == first
    return [message["input"] for message in first["messages"]]


async def test_a_kept_page_is_served_until_a_write_changes_it(client, alice):
    memory_id = await _memory(client, alice, messages=2)
    pages = client.app[MESSAGE_PAGES]
    assert await _inputs(client, alice, memory_id) == ["q0", "q1"]
    assert len(pages) == 1, "the page was kept"

    await _message(client, alice, memory_id, "q2", "a2")
    assert await _inputs(client, alice, memory_id) == ["q0", "q1", "q2"]

    # A trace is not listed, and an update shows at once.
    first = (await _json(await client.get(f"{V212}/{memory_id}/messages", headers=alice.headers)))["messages"][0]
    trace = {"input": "tool call", "parent_message_id": first["message_id"], "trace_number": 1}
    await _json(await client.post(f"{V212}/{memory_id}/messages", json=trace, headers=alice.headers))
    assert await _inputs(client, alice, memory_id) == ["q0", "q1", "q2"]
    url = f"{V212}/message/{first['message_id']}"
    await _json(await client.put(url, json={"response": "rewritten"}, headers=alice.headers))
    listed = await _json(await client.get(f"{V212}/{memory_id}/messages", headers=alice.headers))
    assert listed["messages"][0]["response"] == "rewritten"

    await _json(await client.delete(f"{V212}/{memory_id}", headers=alice.headers))
    await _json(await client.get(f"{V212}/{memory_id}/messages", headers=alice.headers), 404)
    await _json(await client.get(f"{V211}/{memory_id}", headers=alice.headers), 404)


async def test_the_2_11_list_sees_every_write_too(client, alice):
    conversation = await _json(await client.post(V211, json={"name": "c"}, headers=alice.headers))
    url = f"{V211}/{conversation['conversation_id']}"
    for n in range(3):
        await _json(await client.post(url, json={"input": f"q{n}", "response": f"a{n}"}, headers=alice.headers))
        page = await _json(await client.get(url, headers=alice.headers))
        assert [i["input"] for i in page["interactions"]] == [f"q{k}" for k in range(n, -1, -1)]


async def test_a_kept_page_never_reaches_another_caller_form_or_window(client, alice, bob, admin, carol):
    memory_id = await _memory(client, alice, messages=3)
    assert await _inputs(client, alice, memory_id) == ["q0", "q1", "q2"]
    for other in (bob, admin, carol):
        await _json(await client.get(f"{V212}/{memory_id}/messages", headers=other.headers), 404)
        await _json(await client.get(f"{V211}/{memory_id}", headers=other.headers), 404)
    # The 2.11 form of the same conversation: newest first, its own field names.
    old_form = await _json(await client.get(f"{V211}/{memory_id}", headers=alice.headers))
    assert [i["input"] for i in old_form["interactions"]] == ["q2", "q1", "q0"]
    assert "interaction_id" in old_form["interactions"][0] and "message_id" not in old_form["interactions"][0]
    assert await _inputs(client, alice, memory_id, max_results=2) == ["q0", "q1"]
    assert await _inputs(client, alice, memory_id, max_results=1, next_token=1) == ["q1"]
    trimmed = await _json(
        await client.get(
            f"{V212}/{memory_id}/messages", params={"filter_path": "messages.input"}, headers=alice.headers
        )
    )
    assert trimmed == {"messages": [{"input": "q0"}, {"input": "q1"}, {"input": "q2"}]}


async def test_erasing_a_user_retires_their_kept_pages(client, alice, admin):
    memory_id = await _memory(client, alice, messages=1)
    assert await _inputs(client, alice, memory_id) == ["q0"]
    erased = await _json(await client.delete(HISTORIES, params={"filter[user_id]": "alice"}, headers=admin.headers))
    assert erased["data"]["deleted_messages"] == 1
    await _json(await client.get(f"{V212}/{memory_id}/messages", headers=alice.headers), 404)


async def test_every_reader_sees_every_write_acknowledged_before_it_asked(client, alice):
    """Writers and readers race on one memory: a read that starts after a write's answer lists it."""
    memory_id = await _memory(client, alice)

    async def writer(n: int) -> None:
        for k in range(10):
            await _message(client, alice, memory_id, f"w{n}-{k}", "a")
            page = await _json(
                await client.get(f"{V212}/{memory_id}/messages", params={"max_results": 1000}, headers=alice.headers)
            )
            assert f"w{n}-{k}" in [m["input"] for m in page["messages"]]

    async def reader() -> None:
        for _ in range(40):
            await _json(await client.get(f"{V212}/{memory_id}/messages", headers=alice.headers))

    await asyncio.gather(*(writer(n) for n in range(4)), *(reader() for _ in range(4)))
    assert len(await _inputs(client, alice, memory_id, max_results=1000)) == 40


async def test_page_cache_mb_0_keeps_nothing_and_asks_no_version(aiohttp_client, settings, embedder, monkeypatch):
    """With no page kept, a list never asks its memory's version (on OpenSearch that would be a request)."""
    settings = settings.replace(http={"page_cache_mb": 0})
    caller = make_caller(KeyStore(settings.resolved_keys_file), "org-1", "alice")
    client = await aiohttp_client(create_app(settings, embedder=embedder))
    memory_id = await _memory(client, caller, messages=1)

    async def never(conversation_id: str) -> int | None:
        raise AssertionError("a version was asked for a page that cannot be kept")

    monkeypatch.setattr(client.app[MEMORY], "messages_version", never)
    assert await _inputs(client, caller, memory_id) == ["q0"]
    assert len(client.app[MESSAGE_PAGES]) == 0
