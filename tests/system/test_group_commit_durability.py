"""Group commit against real server processes: concurrent memory writes share a COMMIT, and
an acknowledged write still survives SIGKILL, and a full disk refuses the group (507), whole.

The writers run at concurrency 32, so that the server's database thread always
finds several writes queued and commits them together.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import aiohttp
import pytest

from tests.support.live import LiveServer, fault_random, key_headers
from tests.system.test_faults import body_of, fill, mounted

MEMORY = "/_plugins/_ml/memory/conversation"
WRITERS = 32


async def stored_interactions(http: aiohttp.ClientSession, conversation_id: str) -> set[str]:
    async with http.get(f"{MEMORY}/{conversation_id}", params={"max_results": "10000"}) as response:
        assert response.status == 200, await response.text()
        return {i["interaction_id"] for i in (await response.json())["interactions"]}


async def create_conversation(http: aiohttp.ClientSession, name: str) -> str:
    async with http.post(MEMORY, json={"name": name}) as response:
        assert response.status == 200, await response.text()
        return str((await response.json())["conversation_id"])


@pytest.mark.timeout(600)
async def test_group_commit_loses_no_acknowledged_write_across_repeated_sigkills(tmp_path: Path) -> None:
    rounds = int(os.environ.get("GROUP_KILL_ROUNDS", "8"))
    rng = fault_random()
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
    acknowledged: dict[str, set[str]] = {}  # conversation -> its acknowledged interactions

    async def writer(http: aiohttp.ClientSession, tag: str) -> None:
        conversation = await create_conversation(http, tag)
        acknowledged[conversation] = set()
        for i in range(10**6):
            body = {"input": f"question {tag}-{i}", "response": f"answer {i}"}
            async with http.post(f"{MEMORY}/{conversation}", json=body) as response:
                assert response.status == 200, await response.text()
                acknowledged[conversation].add((await response.json())["interaction_id"])

    async def until_killed(http: aiohttp.ClientSession, tag: str) -> None:
        with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
            await writer(http, tag)

    async def check(server: LiveServer) -> int:
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            lost = []
            for conversation, interactions in acknowledged.items():
                lost += sorted(interactions - await stored_interactions(http, conversation))
        assert not lost, f"acknowledged interactions lost: {lost[:20]}"
        return sum(map(len, acknowledged.values()))

    for n in range(rounds):
        server = LiveServer(data_dir).start()
        try:
            await check(server)
            connector = aiohttp.TCPConnector(limit=WRITERS)
            async with aiohttp.ClientSession(server.url, headers=headers, connector=connector) as http:
                stream = asyncio.gather(*(until_killed(http, f"{n}-{w}") for w in range(WRITERS)))
                await asyncio.sleep(rng.uniform(0.5, 2.0))
                server.kill()  # SIGKILL, with writes queued, mid-group or mid-COMMIT
                await stream
        finally:
            server.kill()
    with LiveServer(data_dir) as server:
        total = await check(server)
    print(f"{rounds} kills; {total} acknowledged interactions, all stored")
    assert total > 0


@pytest.mark.timeout(300)
async def test_a_full_disk_at_commit_fails_the_whole_group_with_507_and_loses_nothing(tmp_path: Path) -> None:
    with mounted(tmp_path / "data", "-t", "tmpfs", "-o", "size=48m", "tmpfs") as data_dir:
        headers = key_headers(data_dir)
        server = LiveServer(data_dir).start()
        acknowledged: set[str] = set()
        try:
            connector = aiohttp.TCPConnector(limit=WRITERS)
            async with aiohttp.ClientSession(server.url, headers=headers, connector=connector) as http:
                conversation = await create_conversation(http, "disk")

                async def burst(n: int) -> list[int]:
                    """``WRITERS`` writes at once: they reach the database thread together."""

                    async def write(i: int) -> int:
                        body = {"input": f"question {n}-{i}", "response": "x" * 2000}
                        async with http.post(f"{MEMORY}/{conversation}", json=body) as response:
                            payload = await body_of(response)
                            if response.status == 200:
                                acknowledged.add(payload["interaction_id"])
                            else:
                                assert payload["status"] == 507, payload
                                assert payload["error"]["type"] == "insufficient_storage_exception", payload
                            return response.status

                    return list(await asyncio.gather(*(write(i) for i in range(WRITERS))))

                assert set(await burst(0)) == {200}
                filler = fill(data_dir)
                for n in range(1, 41):  # SQLite may still place a burst or two in space it holds
                    statuses = await burst(n)
                    assert set(statuses) <= {200, 507}, statuses
                    if 507 in statuses:
                        break
                else:
                    raise AssertionError("40 bursts of writes accepted on a full disk")
                assert await stored_interactions(http, conversation) == acknowledged  # the refused are not stored
                filler.unlink()
                assert set(await burst(41)) == {200}
        finally:
            server.kill()
        with LiveServer(data_dir) as restarted:
            async with aiohttp.ClientSession(restarted.url, headers=headers) as http:
                assert await stored_interactions(http, conversation) == acknowledged
