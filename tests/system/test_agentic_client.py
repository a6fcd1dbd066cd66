"""opensearch-py 3.2.0, unchanged, drives the whole agentic memory flow over a real socket: all twelve
``plugins.ml`` agentic methods, against ``memory-plugin serve`` with the LLM connector pointed at a scripted
local chat-completions server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opensearchpy import AsyncOpenSearch, NotFoundError, RequestError

from embedder import ensure_default_model
from memory_plugin.auth import KeyStore
from tests.http.test_agentic import SEMANTIC_CONFIG, conversation
from tests.support.agentic_llm import ScriptedLLM
from tests.support.live import LiveServer


async def eventually(check: Any, timeout: float = 60.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result or asyncio.get_running_loop().time() > deadline:
            return result
        await asyncio.sleep(0.1)


async def test_opensearch_py_drives_the_whole_agentic_flow(tmp_path, aiohttp_server):
    llm = ScriptedLLM()
    llm_server = await aiohttp_server(llm.app())
    data_dir = tmp_path / "data"
    entry, token = KeyStore(data_dir / "keys.json").create("org-1", "alice")
    key_id, secret = token.split(".", 1)
    env = {
        "MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model()),
        "MEMORY_PLUGIN_AGENTIC_LLM_URL": str(llm_server.make_url("/v1/chat/completions")),
        "MEMORY_PLUGIN_AGENTIC_LLM_MODEL": "scripted-model",
    }
    server = LiveServer(data_dir, env=env)
    await asyncio.get_running_loop().run_in_executor(None, server.start)
    client = AsyncOpenSearch(hosts=[server.url], http_auth=(key_id, secret))
    ml = client.plugins.ml
    try:
        created = await ml.create_memory_container(body={"name": "support agent", "configuration": SEMANTIC_CONFIG})
        cid = created["memory_container_id"]
        assert created["status"] == "created"
        assert (await ml.get_memory_container(memory_container_id=cid))["name"] == "support agent"
        updated = await ml.update_memory_container(memory_container_id=cid, body={"description": "tier 1"})
        assert updated["result"] == "updated"
        found = await ml.search_memory_container(body={"query": {"match": {"description": "tier"}}})
        assert [hit["_id"] for hit in found["hits"]["hits"]] == [cid]

        session = await ml.create_memory_container_session(
            memory_container_id=cid,
            body={"session_id": "call-1", "summary": "router trouble", "namespace": {"user_id": "bob"}},
        )
        assert session == {"session_id": "call-1", "status": "created"}
        messages = await ml.add_agentic_memory(
            memory_container_id=cid,
            body={
                "messages": conversation("My Fritzbox router drops the line every evening", "I will open a ticket."),
                "namespace": {"user_id": "bob", "session_id": "call-1"},
                "payload_type": "conversational",
            },
        )
        assert messages["session_id"] == "call-1"
        data = await ml.add_agentic_memory(
            memory_container_id=cid,
            body={"payload_type": "data", "structured_data": {"ticket": 4471}, "namespace": {"user_id": "bob"}},
        )
        llm.facts = lambda kind, msgs: ["Bob's Fritzbox router drops the connection every evening"]
        inferred = await ml.add_agentic_memory(
            memory_container_id=cid,
            body={
                "messages": conversation("My Fritzbox router drops the line every evening"),
                "namespace": {"user_id": "bob", "session_id": "call-1"},
                "infer": True,
            },
        )
        assert set(inferred) == {"session_id", "working_memory_id"}

        async def long_term() -> list[dict[str, Any]]:
            result = await ml.search_agentic_memory(
                memory_container_id=cid, doc_type="long-term", body={"query": {"term": {"namespace.user_id": "bob"}}}
            )
            return result["hits"]["hits"]  # type: ignore[no-any-return]

        [memory] = await eventually(long_term)
        assert memory["_source"]["memory"] == "Bob's Fritzbox router drops the connection every evening"
        assert memory["_source"]["strategy_type"] == "SEMANTIC"
        history = await ml.search_agentic_memory(
            memory_container_id=cid, doc_type="history", body={"query": {"term": {"action": "ADD"}}}
        )
        assert history["hits"]["hits"][0]["_source"]["memory_id"] == memory["_id"]
        assert llm.requests[-1]["model"] == "scripted-model"

        semantic = await eventually(
            lambda: client.transport.perform_request(
                "POST",
                f"/_plugins/_ml/memory_containers/{cid}/memories/long-term/_semantic_search",
                body={"query": "internet connection problems at night", "namespace": {"user_id": "bob"}},
            )
        )
        assert semantic["hits"]["hits"][0]["_id"] == memory["_id"]
        hybrid = await client.transport.perform_request(
            "GET",
            f"/_plugins/_ml/memory_containers/{cid}/memories/long-term/_hybrid_search",
            body={"query": "Fritzbox", "bm25_weight": 0.6, "neural_weight": 0.4},
        )
        assert hybrid["hits"]["hits"][0]["_id"] == memory["_id"]

        session_doc = await ml.get_agentic_memory(memory_container_id=cid, doc_type="sessions", id="call-1")
        assert session_doc["summary"] == "router trouble"
        working = await ml.get_agentic_memory(memory_container_id=cid, doc_type="working", id=data["working_memory_id"])
        assert working["payload_type"] == "data" and working["structured_data"] == {"ticket": 4471}
        changed = await ml.update_agentic_memory(
            memory_container_id=cid,
            doc_type="long-term",
            id=memory["_id"],
            body={"memory": "Bob's router was replaced", "tags": {"state": "fixed"}},
        )
        assert changed["result"] == "updated" and changed["_version"] == 2
        assert (await ml.get_agentic_memory(memory_container_id=cid, doc_type="long-term", id=memory["_id"]))[
            "tags"
        ] == {"state": "fixed"}

        conversation_hits = await ml.search_agentic_memory(
            memory_container_id=cid,
            doc_type="working",
            body={"query": {"term": {"namespace.session_id": "call-1"}}, "sort": [{"created_time": {"order": "asc"}}]},
        )
        assert [h["_id"] for h in conversation_hits["hits"]["hits"]] == [
            messages["working_memory_id"],
            inferred["working_memory_id"],
        ]
        deleted = await ml.delete_agentic_memory(
            memory_container_id=cid, doc_type="working", id=messages["working_memory_id"]
        )
        assert deleted["result"] == "deleted"
        with pytest.raises(NotFoundError):
            await ml.get_agentic_memory(memory_container_id=cid, doc_type="working", id=messages["working_memory_id"])
        by_query = await ml.delete_agentic_memory_query(
            memory_container_id=cid, doc_type="working", body={"query": {"match_all": {}}}
        )
        assert by_query["deleted"] == 2
        with pytest.raises(RequestError) as bad:
            await ml.get_agentic_memory(memory_container_id=cid, doc_type="long_term", id=memory["_id"])
        assert "Invalid memory type: long_term" in str(bad.value.info)

        gone = await ml.delete_memory_container(memory_container_id=cid, params={"delete_all_memories": "true"})
        assert gone["result"] == "deleted"
        with pytest.raises(NotFoundError):
            await ml.get_memory_container(memory_container_id=cid)
    finally:
        await client.close()
        server.kill()
