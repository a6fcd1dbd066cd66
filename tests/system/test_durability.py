"""Acknowledged writes survive a SIGKILL (a real subprocess, killed for real)."""

from __future__ import annotations

import asyncio

import aiohttp

from memory_plugin.auth import KeyStore
from tests.support.live import LiveServer, key_headers

BASE = "/_plugins/_ml/memory/conversation"


async def test_sigkill_after_200_acknowledged_writes_loses_nothing(tmp_path):
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
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


async def test_ingest_cli_then_sigkill_loses_no_acknowledged_record(tmp_path):
    """``memory-plugin ingest`` loads a file; a SIGKILL right after loses none of it."""
    import json
    import subprocess
    import sys

    data_dir = tmp_path / "data"
    _, token = KeyStore(data_dir / "keys.json").create("org-1", None)
    headers = {"Authorization": f"Bearer {token}"}
    topics = ["billing", "router", "delivery", "password", "refund", "upgrade", "outage", "address"]
    lines = [
        {
            "record_id": f"rec-{n}",
            "record_type": "voice",
            "region": ["USA", "DEU", "AUS", "UAE"][n % 4],
            "text": f"Call {n}: the customer asked about {topics[n % len(topics)]} number {n}.",
        }
        for n in range(120)
    ]
    source = tmp_path / "records.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    server = LiveServer(data_dir).start()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "memory_plugin",
                "ingest",
                str(source),
                "--url",
                server.url,
                "--key",
                token,
                "--batch-size",
                "25",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "ingested 120 records (120 chunks)" in done.stdout
    finally:
        server.kill()

    with LiveServer(data_dir) as restarted:
        async with aiohttp.ClientSession(restarted.url, headers=headers) as http:
            found = set()
            for topic in topics:
                params = {"q": topic, "record_type": "voice", "top_k": 100}
                async with http.get("/v2/ai/conversation_histories", params=params) as response:
                    assert response.status == 200
                    found |= {item["record_id"] for item in (await response.json())["data"]}
            for n in range(120):  # each record is findable by its own words
                if f"rec-{n}" in found:
                    continue
                params = {"q": lines[n]["text"], "record_type": "voice", "top_k": 1}
                async with http.get("/v2/ai/conversation_histories", params=params) as response:
                    found |= {item["record_id"] for item in (await response.json())["data"]}
    assert found == {f"rec-{n}" for n in range(120)}
