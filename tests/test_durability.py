"""Acknowledged writes survive a SIGKILL (a real subprocess, killed for real)."""

from __future__ import annotations

import asyncio

import aiohttp

from memory_plugin.auth import KeyStore
from tests.live import LiveServer

BASE = "/_plugins/_ml/memory/conversation"


async def test_sigkill_after_200_acknowledged_writes_loses_nothing(tmp_path):
    data_dir = tmp_path / "data"
    _, token = KeyStore(data_dir / "keys.json").create("org-1", "alice")
    headers = {"Authorization": f"Bearer {token}"}
    acknowledged: list[str] = []
    server = LiveServer(data_dir).start()
    try:
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            async with http.post(BASE, json={"name": "durable"}) as response:
                conversation_id = (await response.json())["conversation_id"]

            async def write(n: int) -> None:
                async with http.post(f"{BASE}/{conversation_id}", json={"input": f"q{n}", "response": f"a{n}"}) as r:
                    assert r.status == 200
                    acknowledged.append((await r.json())["interaction_id"])

            for batch in range(0, 200, 20):
                await asyncio.gather(*(write(n) for n in range(batch, batch + 20)))
    finally:
        server.kill()  # SIGKILL, right after the last acknowledgement
    assert len(acknowledged) == 200

    with LiveServer(data_dir) as restarted:
        async with aiohttp.ClientSession(restarted.url, headers=headers) as http:
            async with http.get(f"{BASE}/{conversation_id}", params={"max_results": 1000}) as response:
                stored = {i["interaction_id"] for i in (await response.json())["interactions"]}
    assert stored == set(acknowledged)
