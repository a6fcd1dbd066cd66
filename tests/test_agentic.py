"""Agentic memory (ML Commons 3.3+ memory containers) over HTTP: the flow, infer, search, and every error string."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory_plugin.app import create_app
from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.agentic.service import hybrid_scores, min_max
from tests.agentic_llm import ScriptedLLM

BASE = "/_plugins/_ml/memory_containers"
SEMANTIC_CONFIG = {
    "embedding_model_type": "text_embedding",
    "embedding_model_id": "built-in",
    "embedding_dimension": 384,
    "llm_id": "chat",
    "strategies": [{"type": "semantic", "namespace": ["user_id"]}],
}


@pytest.fixture
async def llm(aiohttp_server) -> ScriptedLLM:
    scripted = ScriptedLLM()
    scripted.server = await aiohttp_server(scripted.app())  # type: ignore[attr-defined]
    return scripted


@pytest.fixture
async def api(aiohttp_client, settings, embedder, llm, alice, bob, carol, admin):
    settings = settings.replace(agentic_llm_url=str(llm.server.make_url("/v1/chat/completions")), agentic_llm_api_key="sk-test")
    return await aiohttp_client(create_app(settings, embedder=embedder))


async def call(api, caller, method: str, path: str, body: Any = None, status: int = 200, **kwargs: Any) -> Any:
    response = await api.request(method, BASE + path, json=body, headers=caller.headers, **kwargs)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def error(api, caller, method: str, path: str, body: Any, status: int, reason: str, type_: str | None = None) -> None:
    payload = await call(api, caller, method, path, body, status)
    assert payload["status"] == status
    assert payload["error"]["reason"].startswith(reason), payload
    if type_:
        assert payload["error"]["type"] == type_


async def settle(api) -> None:
    await api.app[AGENTIC].settled()


async def container(api, caller, configuration: dict[str, Any] | None = None, **extra: Any) -> str:
    body = {"name": "agent", **extra}
    if configuration is not None:
        body["configuration"] = configuration
    created = await call(api, caller, "POST", "/_create", body)
    assert created["status"] == "created" and len(created["memory_container_id"]) == 20
    return str(created["memory_container_id"])


def conversation(*texts: str) -> list[dict[str, Any]]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": [{"type": "text", "text": t}]} for i, t in enumerate(texts)]


async def test_container_crud_and_defaults(api, alice):
    cid = await container(api, alice, SEMANTIC_CONFIG, description="support")
    doc = await call(api, alice, "GET", f"/{cid}")
    config = doc["configuration"]
    assert doc["name"] == "agent" and doc["description"] == "support"
    assert isinstance(doc["created_time"], int) and doc["created_time"] == doc["last_updated_time"]
    assert config["index_prefix"] == "default" and config["use_system_index"] is True
    assert config["embedding_model_type"] == "TEXT_EMBEDDING" and config["max_infer_size"] == 5
    assert config["disable_history"] is False and config["disable_session"] is False
    [strategy] = config["strategies"]
    assert strategy["type"] == "SEMANTIC" and strategy["enabled"] is True and strategy["namespace"] == ["user_id"]
    assert strategy["id"].startswith("semantic_") and len(strategy["id"]) == len("semantic_") + 8

    updated = await call(api, alice, "PUT", f"/{cid}", {"name": "renamed", "configuration": {
        "strategies": [{"id": strategy["id"], "enabled": False, "namespace": ["user_id", "session_id"]},
                       {"type": "USER_PREFERENCE", "namespace": ["user_id"]}]}})
    assert updated["result"] == "updated" and updated["_version"] == 2
    assert updated["_index"] == ".plugins-ml-am-memory-container"
    doc = await call(api, alice, "GET", f"/{cid}")
    assert doc["name"] == "renamed"
    first, second = doc["configuration"]["strategies"]
    assert first == {**strategy, "enabled": False, "namespace": ["user_id", "session_id"]}
    assert second["type"] == "USER_PREFERENCE" and second["id"].startswith("user_preference_")

    found = await call(api, alice, "POST", "/_search", {"query": {"match": {"name": "renamed"}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == [cid]
    assert found["hits"]["hits"][0]["_version"] == 2 and "_seq_no" in found["hits"]["hits"][0]

    deleted = await call(api, alice, "DELETE", f"/{cid}")
    assert deleted["result"] == "deleted" and deleted["forced_refresh"] is True
    await error(api, alice, "GET", f"/{cid}", None, 404,
                f"Failed to find memory container with the provided memory container id: {cid}", "status_exception")


async def test_add_working_memory_sessions_and_reads(api, alice):
    cid = await container(api, alice)  # no configuration: working and sessions only, and no LLM, so no auto session
    added = await call(api, alice, "POST", f"/{cid}/memories", {
        "messages": conversation("hi", "hello"), "namespace": {"user_id": "bob", "n": 1},
        "metadata": {"b": {"a": 1}}, "tags": {"topic": "greeting"}})
    assert set(added) == {"working_memory_id"}
    working = await call(api, alice, "GET", f"/{cid}/memories/working/{added['working_memory_id']}")
    assert working["payload_type"] == "conversational" and working["messages"] == conversation("hi", "hello")
    assert working["namespace"] == {"user_id": "bob", "n": "1"} and working["metadata"] == {"b": '{"a":1}'}
    assert "namespace_size" not in working and working["infer"] is False and working["owner_id"] == "alice"

    with_session = await call(api, alice, "POST", f"/{cid}/memories", {
        "messages": conversation("again"), "namespace": {"user_id": "bob", "session_id": "s-1"}})
    assert with_session["session_id"] == "s-1"
    session = await call(api, alice, "GET", f"/{cid}/memories/sessions/s-1")
    assert session["namespace"] == {"session_id": "s-1"} and session["memory_container_id"] == cid

    created = await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s-2", "summary": "custom"})
    assert created == {"session_id": "s-2", "status": "created"}
    again = await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s-2"})
    assert again == {"session_id": "s-2", "status": "exists"}
    auto = await call(api, alice, "POST", f"/{cid}/memories/sessions", {"summary": "x", "namespace": {"user_id": "bob"}})
    assert auto["status"] == "created" and len(auto["session_id"]) == 20

    found = await call(api, alice, "GET", f"/{cid}/memories/sessions/_search", {"query": {"match_all": {}}, "sort": [{"created_time": "asc"}]})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == ["s-1", "s-2", auto["session_id"]]
    by_user = await call(api, alice, "POST", f"/{cid}/memories/working/_search",
                         {"query": {"bool": {"filter": [{"term": {"namespace.user_id": "bob"}}]}}})
    assert by_user["hits"]["total"]["value"] == 2
    assert by_user["hits"]["hits"][0]["_index"] == ".plugins-ml-am-default-memory-working"
    nested = await call(api, alice, "GET", f"/{cid}/memories/working/_search", {
        "query": {"nested": {"path": "messages", "query": {"match": {"messages.content.text": "again"}}}}})
    assert nested["hits"]["total"]["value"] == 1

    updated = await call(api, alice, "PUT", f"/{cid}/memories/sessions/s-2", {"summary": "new", "name": "ignored"})
    assert updated["result"] == "updated" and updated["_version"] == 2
    assert (await call(api, alice, "GET", f"/{cid}/memories/sessions/s-2"))["summary"] == "new"
    deleted = await call(api, alice, "DELETE", f"/{cid}/memories/working/{added['working_memory_id']}")
    assert deleted["result"] == "deleted"
    await error(api, alice, "GET", f"/{cid}/memories/working/{added['working_memory_id']}", None, 404, "Memory not found")
    by_query = await call(api, alice, "POST", f"/{cid}/memories/sessions/_delete_by_query", {"query": {"match_all": {}}})
    assert by_query["deleted"] == 3 and by_query["total"] == 3 and by_query["requests_per_second"] == -1.0
