"""Hostile and careless agentic memory requests (a second attacker pass after issue 12).

Each is a request against the in-process server that must answer with the exact
status and ml-commons' error format, and leave the data as it was.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from memory_plugin.agentic.routes import AGENTIC
from tests.http.test_agentic import call, container, conversation, error, settle

#: The module that holds the evaluation budget (imported by path: ``dsl.execute`` is also its function).
evaluation = importlib.import_module("memory_plugin.dsl.execute")

FACTS = ["Bob likes green tea", "Bob lives in Lisbon"]


def configuration(api) -> dict[str, Any]:
    """Long-term memory on the test's embedder (the deterministic double: no model needed here)."""
    return {
        "embedding_model_type": "TEXT_EMBEDDING",
        "embedding_model_id": "built-in",
        "embedding_dimension": api.app[AGENTIC].embedder.dimension,
        "llm_id": "chat",
        "strategies": [{"type": "SEMANTIC", "namespace": ["user_id"]}],
    }


async def seed(api, caller, llm, tags: dict[str, str]) -> str:
    """A container whose long-term memory holds ``FACTS`` for bob, each carrying ``tags``."""
    cid = await container(api, caller, configuration(api))
    llm.facts = lambda kind, messages: FACTS
    body = {"messages": conversation("..."), "namespace": {"user_id": "bob"}, "tags": tags, "infer": True}
    await call(api, caller, "POST", f"/{cid}/memories", body)
    await settle(api)
    return cid


def memories(found: dict[str, Any]) -> list[str]:
    return sorted(hit["_source"]["memory"] for hit in found["hits"]["hits"])


@pytest.mark.backends("embedded", "opensearch")  # these need no SQLite
async def test_a_search_may_filter_on_a_thousand_tags_and_no_more(api, alice, llm):
    """SQLite refused the 500th term (a compound SELECT, then an expression too deep), OpenSearch the 1020th (too
    many clauses): a 500. Now up to 1000 is one statement, and past it a 400 naming the field, on both stores."""
    tags = {f"t{i}": f"v{i}" for i in range(999)}  # and namespace.user_id: 1000 terms
    cid = await seed(api, alice, llm, tags)
    for kind in ("_semantic_search", "_hybrid_search"):
        for extra in ({}, {"filter": {"match_all": {}}}):  # the filter takes the second statement's path
            body = {"query": "tea", "namespace": {"user_id": "bob"}, "tags": tags, **extra}
            found = await call(api, alice, "POST", f"/{cid}/memories/long-term/{kind}", body)
            assert memories(found) == sorted(FACTS), (kind, extra)
            other = {**tags, "t998": "other"}
            body = {"query": "tea", "namespace": {"user_id": "bob"}, "tags": other, **extra}
            found = await call(api, alice, "POST", f"/{cid}/memories/long-term/{kind}", body)
            assert found["hits"]["hits"] == [], (kind, extra)
        too_many = {"query": "tea", "namespace": {"user_id": "bob"}, "tags": {**tags, "u": "x"}}
        payload = await call(api, alice, "POST", f"/{cid}/memories/long-term/{kind}", too_many, 400)
        assert payload["error"]["type"] == "illegal_argument_exception"
        assert payload["error"]["reason"] == "namespace and tags hold 1001 terms; a search may filter on at most 1000"
    everything = await call(api, alice, "POST", f"/{cid}/memories/long-term/_search", {"query": {"match_all": {}}})
    assert memories(everything) == sorted(FACTS)


@pytest.mark.backends("embedded", "opensearch")  # these need no SQLite
async def test_a_nested_query_without_its_query_is_a_400_and_deletes_nothing(api, alice):
    """``{"nested": {"path": ..., "query": null}}`` read as no query at all: a delete by query deleted every memory."""
    cid = await container(api, alice)
    for i in range(3):
        await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation(f"message {i}")})
    for query in ({"nested": {"path": "messages", "query": None}}, {"nested": {"path": "messages"}}):
        for path in ("_delete_by_query", "_search"):
            await error(
                api,
                alice,
                "POST",
                f"/{cid}/memories/working/{path}",
                {"query": query},
                400,
                "unsupported query [nested]",
                "parsing_exception",
            )
    left = await call(api, alice, "POST", f"/{cid}/memories/working/_search", {"query": {"match_all": {}}})
    assert left["hits"]["total"]["value"] == 3
    # A nested query with its query still works as before.
    nested = {"nested": {"path": "messages", "query": {"match": {"messages.content.text": "message"}}}}
    found = await call(api, alice, "POST", f"/{cid}/memories/working/_search", {"query": nested})
    assert found["hits"]["total"]["value"] == 3


async def test_a_nested_query_on_a_path_that_is_not_nested_is_refused_and_deletes_nothing(api, alice):
    """Unwrapped whatever its path, ``nested`` on an unknown path matched every memory: a delete by query with it
    deleted them all.  Now the shard's refusal (a 400 on purpose: the node's ``IllegalStateException`` is
    a 500), or nothing matched with ``ignore_unmapped``."""
    cid = await container(api, alice)
    for i in range(3):
        await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation(f"message {i}")})
    for path in ("no_such_path", "namespace", "messages.content"):
        query = {"nested": {"path": path, "query": {"match_all": {}}}}
        for endpoint in ("_delete_by_query", "_search"):
            refused = await call(api, alice, "POST", f"/{cid}/memories/working/{endpoint}", {"query": query}, 400)
            assert refused["error"]["type"] == "search_phase_execution_exception"
            [cause] = refused["error"]["root_cause"]
            assert cause["type"] == "query_shard_exception"
            assert cause["reason"] == f"[nested] failed to find nested object under path [{path}]"
    unmapped = {"nested": {"path": "no_such_path", "query": {"match_all": {}}, "ignore_unmapped": True}}
    found = await call(api, alice, "POST", f"/{cid}/memories/working/_search", {"query": unmapped})
    assert found["hits"]["total"]["value"] == 0
    deleted = await call(api, alice, "POST", f"/{cid}/memories/working/_delete_by_query", {"query": unmapped})
    assert deleted["deleted"] == 0
    left = await call(api, alice, "POST", f"/{cid}/memories/working/_search", {"query": {"match_all": {}}})
    assert left["hits"]["total"]["value"] == 3
    strategies = {"nested": {"path": "configuration.strategies", "query": {"match_all": {}}}}
    assert (await call(api, alice, "POST", "/_search", {"query": strategies}))["hits"]["total"]["value"] >= 1


async def test_agentic_query_evaluation_is_bounded_like_memory_search(api, alice, llm, monkeypatch):
    """Container and memory searches, deletes by query and search filters ran without a budget (the container
    search on the event loop itself: 2000 containers and a thousand wildcards stalled every request for minutes).
    Now they run in the shared evaluation threads, and past the budget answer ``timed_out`` as OpenSearch does."""
    cid = await seed(api, alice, llm, {"topic": "drinks"})
    await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation("hello")})
    searches = [
        ("/_search", {"query": {"wildcard": {"name": "*"}}}),
        (f"/{cid}/memories/working/_search", {"query": {"match_all": {}}}),
        (f"/{cid}/memories/long-term/_search", {"query": {"match_all": {}}}),
    ]
    monkeypatch.setattr(evaluation, "EVALUATION_BUDGET_SECONDS", 0.0)
    for path, body in searches:
        found = await call(api, alice, "POST", path, body)
        assert found["timed_out"] is True and found["hits"]["hits"] == [], path
    deleted = await call(api, alice, "POST", f"/{cid}/memories/working/_delete_by_query", {"query": {"match_all": {}}})
    assert deleted["timed_out"] is True and deleted["deleted"] == 0 and deleted["total"] == 0
    filtered = {"query": "tea", "filter": {"match_all": {}}}
    found = await call(api, alice, "POST", f"/{cid}/memories/long-term/_hybrid_search", filtered)
    assert found["timed_out"] is True and found["hits"]["hits"] == []

    monkeypatch.setattr(evaluation, "EVALUATION_BUDGET_SECONDS", 2.0)
    for path, body in searches:
        found = await call(api, alice, "POST", path, body)
        assert found["timed_out"] is False and found["hits"]["hits"], path
    found = await call(api, alice, "POST", f"/{cid}/memories/long-term/_hybrid_search", filtered)
    assert found["timed_out"] is False and memories(found) == sorted(FACTS)
    deleted = await call(api, alice, "POST", f"/{cid}/memories/working/_delete_by_query", {"query": {"match_all": {}}})
    assert deleted["timed_out"] is False and deleted["deleted"] == 2  # the infer add's and the plain add's


async def test_an_add_racing_a_container_delete_writes_nothing(api, alice):
    """An add read its container, the container was deleted, then the add wrote: 200, and its working memory and
    session stayed on disk forever, unreachable by any path (and not erased with the container)."""
    store = api.app[AGENTIC].store
    cid = await container(api, alice)
    add_memory, create_session = store.add_memory, store.create_session

    async def deleted_first(owner: Any, container_id: str, *args: Any) -> Any:
        await store.delete_container(owner, container_id)  # a concurrent DELETE wins the race
        write = add_memory if len(args) == 1 else create_session
        return await write(owner, container_id, *args)

    store.add_memory = store.create_session = deleted_first
    added = {"messages": conversation("hi"), "namespace": {"session_id": "s1"}}
    await error(api, alice, "POST", f"/{cid}/memories", added, 404, "Memory container not found", "status_exception")
    cid = await container(api, alice)
    await error(
        api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s2"}, 404, "Memory container not found"
    )
    rows = await store.db.run(lambda c: c.execute("SELECT count(*) FROM memories").fetchone()[0])
    assert rows == 0
    store.add_memory, store.create_session = add_memory, create_session
    cid = await container(api, alice)
    await call(api, alice, "POST", f"/{cid}/memories", added)
    assert (await call(api, alice, "GET", f"/{cid}/memories/sessions/s1"))["namespace"] == {"session_id": "s1"}


@pytest.mark.backends("embedded", "opensearch")  # these need no SQLite
async def test_message_content_must_be_an_array_of_objects(api, alice):
    """A string ``content`` was stored on SQLite and a 500 on OpenSearch (``content`` is a flat_object there)."""
    cid = await container(api, alice)
    for content in ("hello", 5, ["hello"], {"text": "hello"}):
        body = {"messages": [{"role": "user", "content": content}]}
        await error(
            api,
            alice,
            "POST",
            f"/{cid}/memories",
            body,
            400,
            "[content] must be an array of objects",
            "x_content_parse_exception",
        )
    left = await call(api, alice, "POST", f"/{cid}/memories/working/_search", {"query": {"match_all": {}}})
    assert left["hits"]["total"]["value"] == 0
    await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation("hello")})


@pytest.mark.backends("embedded", "opensearch")  # these need no SQLite
async def test_ids_opensearch_cannot_hold_are_a_400_or_absent(api, alice):
    """A session id becomes a document id: past 512 bytes, or empty, OpenSearch refused it (a 500 there), and an id
    in the path too long for its request line was a 500 where it can only be absent."""
    cid = await container(api, alice)
    too_long = "é" * 257  # 514 bytes
    await error(
        api,
        alice,
        "POST",
        f"/{cid}/memories/sessions",
        {"session_id": too_long},
        400,
        "[session_id] must be 1 to 512 bytes long, but was 514",
        "illegal_argument_exception",
    )
    for session_id, size in ((too_long, 514), ("", 0)):
        body = {"messages": conversation("hi"), "namespace": {"session_id": session_id}}
        reason = f"[namespace.session_id] must be 1 to 512 bytes long, but was {size}"
        await error(api, alice, "POST", f"/{cid}/memories", body, 400, reason, "illegal_argument_exception")
    for memory_type in ("sessions", "working"):
        await error(api, alice, "GET", f"/{cid}/memories/{memory_type}/{'a' * 5000}", None, 404, "Memory not found")
    await error(api, alice, "GET", f"/{'a' * 5000}", None, 404, "Failed to find memory container")
    for memory_type in ("sessions", "working"):
        left = await call(api, alice, "POST", f"/{cid}/memories/{memory_type}/_search", {"query": {"match_all": {}}})
        assert left["hits"]["total"]["value"] == 0, memory_type
    created = await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "é" * 256})  # 512 bytes
    assert created == {"session_id": "é" * 256, "status": "created"}
