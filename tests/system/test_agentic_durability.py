"""Agentic memory survives a SIGKILL: acknowledged adds are all there, queued infer runs resume, and an infer
run is applied whole or not at all (a real subprocess, killed for real, while the LLM is mid-answer)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter

import aiohttp

from embedder import ensure_default_model
from tests.http.test_agentic import SEMANTIC_CONFIG, conversation
from tests.support.agentic_llm import ScriptedLLM
from tests.support.live import LiveServer, key_headers
from tests.system.test_agentic_client import eventually

BASE = "/_plugins/_ml/memory_containers"


async def test_sigkill_mid_infer_loses_nothing_and_applies_nothing_by_halves(tmp_path, aiohttp_server):
    llm = ScriptedLLM()
    llm.facts = lambda kind, messages: [f"{kind}: {messages[0]['content'][0]['text']}"]
    llm.hang = {"USER_PREFERENCE"}  # the second strategy's extraction never answers before the kill
    llm_server = await aiohttp_server(llm.app())
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
    env = {
        "MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model()),
        "MEMORY_PLUGIN_AGENTIC_LLM_URL": str(llm_server.make_url("/v1/chat/completions")),
    }
    configuration = {
        **SEMANTIC_CONFIG,
        "strategies": [
            {"type": "SEMANTIC", "namespace": ["user_id"]},
            {"type": "USER_PREFERENCE", "namespace": ["user_id"]},
        ],
    }
    loop = asyncio.get_running_loop()
    server = LiveServer(data_dir, env=env)
    await loop.run_in_executor(None, server.start)
    acknowledged: list[str] = []
    try:
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            async with http.post(BASE + "/_create", json={"name": "durable", "configuration": configuration}) as r:
                cid = (await r.json())["memory_container_id"]

            async def add(n: int) -> None:
                body = {
                    "messages": conversation(f"fact number {n}"),
                    "infer": n % 10 == 0,
                    "namespace": {"user_id": f"user-{n % 3}", "session_id": "s"},
                }
                async with http.post(f"{BASE}/{cid}/memories", json=body) as response:
                    assert response.status == 200, await response.text()
                    acknowledged.append((await response.json())["working_memory_id"])

            for batch in range(0, 200, 25):
                await asyncio.gather(*(add(n) for n in range(batch, batch + 25)))

            # the first infer run is inside the LLM's second call: the first strategy's facts are in hand
            async def second_call_in_flight() -> bool:
                return any("preferences" in request["messages"][0]["content"] for request in llm.requests)

            assert await eventually(second_call_in_flight)
    finally:
        server.kill()
    assert len(acknowledged) == 200

    with sqlite3.connect(data_dir / "agentic.sqlite3") as db:  # what the killed server left on disk
        assert db.execute("SELECT count(*) FROM memories WHERE memory_type = 'working'").fetchone()[0] == 200
        assert (
            db.execute("SELECT count(*) FROM memories WHERE memory_type IN ('long-term', 'history')").fetchone()[0] == 0
        )
        assert db.execute("SELECT count(*) FROM infer_jobs").fetchone()[0] == 20

    llm.hang = set()
    llm.release.set()
    restarted = LiveServer(data_dir, env=env)
    await loop.run_in_executor(None, restarted.start)
    try:
        async with aiohttp.ClientSession(restarted.url, headers=headers) as http:

            async def search(memory_type: str) -> list[dict]:
                async with http.post(
                    f"{BASE}/{cid}/memories/{memory_type}/_search", json={"query": {"match_all": {}}, "size": 1000}
                ) as response:
                    return (await response.json())["hits"]["hits"]  # type: ignore[no-any-return]

            stored = {hit["_id"] for hit in await search("working")}
            assert stored == set(acknowledged)

            async def all_long_term() -> list[dict] | None:
                hits = await search("long-term")
                return hits if len(hits) >= 40 else None

            memories = await eventually(all_long_term)
            texts = Counter(hit["_source"]["memory"] for hit in memories)
            expected = {
                f"{kind}: fact number {n}" for kind in ("SEMANTIC", "USER_PREFERENCE") for n in range(0, 200, 10)
            }
            assert set(texts) == expected and set(texts.values()) == {1}  # every run applied, none twice
            history = await search("history")
            assert Counter(hit["_source"]["action"] for hit in history) == {"ADD": 40}

            async def embedded() -> bool:
                async with http.post(
                    f"{BASE}/{cid}/memories/long-term/_semantic_search", json={"query": "fact number 120", "k": 40}
                ) as response:
                    return len((await response.json())["hits"]["hits"]) == 40

            assert await eventually(embedded)
    finally:
        restarted.kill()
