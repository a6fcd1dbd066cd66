"""The bridge's outbox against real faults: SIGKILL with entries pending, a full region disk, a hanging region.

A memory write's status depends only on the memory commit; what the history
index must mirror is in the outbox and lands once the fault is gone, without
anyone retrying.  Real server processes, the real model, real file systems.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support import polling
from tests.support.live import LiveServer, key_headers
from tests.system.test_faults import HISTORIES, MEMORY, fill, hanging_listener, mounted, server_env, words

__all__ = ["server_env"]  # the module fixture, shared with the other fault tests

BRIDGED = {"MEMORY_PLUGIN_BRIDGE_ENABLED": "true", "MEMORY_PLUGIN_BRIDGE_RETRY_MAX_SECONDS": "1"}


def outbox_size(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "memory.sqlite3") as connection:
        return int(connection.execute("SELECT count(*) FROM bridge_outbox").fetchone()[0])


async def new_conversation(http: aiohttp.ClientSession, name: str) -> str:
    async with http.post(MEMORY, json={"name": name}) as response:
        assert response.status == 200, await response.text()
        return str((await response.json())["conversation_id"])


async def add(http: aiohttp.ClientSession, conversation_id: str, text: str) -> str:
    async with http.post(f"{MEMORY}/{conversation_id}", json={"input": text, "response": "noted"}) as response:
        assert response.status == 200, await response.text()
        return str((await response.json())["interaction_id"])


async def add_all(http: aiohttp.ClientSession, conversation_id: str, texts: list[str]) -> list[str]:
    """Sixteen at a time: the ids, every one acknowledged."""
    semaphore = asyncio.Semaphore(16)

    async def one(text: str) -> str:
        async with semaphore:
            return await add(http, conversation_id, text)

    return list(await asyncio.gather(*(one(text) for text in texts)))


async def listed(http: aiohttp.ClientSession, conversation_id: str) -> list[str]:
    async with http.get(f"{MEMORY}/{conversation_id}", params={"max_results": "10000"}) as response:
        assert response.status == 200, await response.text()
        return [i["interaction_id"] for i in (await response.json())["interactions"]]


async def searchable(http: aiohttp.ClientSession, interaction_id: str) -> bool:
    params = {"q": "customer", "record_type": "ai_pipeline_storage", "filter[record_id]": interaction_id}
    async with http.get(HISTORIES, params=params) as response:
        assert response.status == 200, await response.text()
        return bool((await response.json())["data"])


async def conversation_records(http: aiohttp.ClientSession, conversation_id: str) -> list[str]:
    params = {
        "q": "customer",
        "record_type": "ai_pipeline_storage",
        "top_k": "100",
        "filter[conversation_id]": conversation_id,
    }
    async with http.get(HISTORIES, params=params) as response:
        assert response.status == 200, await response.text()
        return [hit["record_id"] for hit in (await response.json())["data"]]


async def backlog(http: aiohttp.ClientSession) -> int:
    async with http.get("/_health") as response:
        return int((await response.json())["details"]["bridge"]["backlog"])


async def eventually(check: Any, what: str) -> None:
    await polling.eventually(check, what, timeout=180.0, interval=0.5)


async def all_searchable(http: aiohttp.ClientSession, interaction_ids: list[str]) -> list[str]:
    """The ids not (yet) searchable."""
    semaphore = asyncio.Semaphore(8)

    async def missing(interaction_id: str) -> str | None:
        async with semaphore:
            return None if await searchable(http, interaction_id) else interaction_id

    return [i for i in await asyncio.gather(*(missing(i) for i in interaction_ids)) if i is not None]


@pytest.mark.timeout(600)
async def test_sigkill_with_a_non_empty_outbox_loses_no_acknowledged_interaction(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    rng = random.Random(13)
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
    env = {**server_env, **BRIDGED}
    acknowledged: list[str] = []
    server = LiveServer(data_dir, env=env).start()
    try:
        for round_ in range(2):
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                conversation_id = await new_conversation(http, f"kill-{round_}")
                texts = [f"customer {round_}-{n} {words(rng, 30)}" for n in range(150)]
                acknowledged += await add_all(http, conversation_id, texts)
            server.kill()  # SIGKILL right after the last acknowledgement: the indexer is mid-way
            pending = outbox_size(data_dir)
            assert pending > 0, "the outbox was already empty at the kill: nothing was tested"
            print(f"round {round_}: killed with {pending} outbox entries pending")
            server = LiveServer(data_dir, env=env).start()
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            missing: list[str] = acknowledged

            async def caught_up() -> bool:
                nonlocal missing
                missing = await all_searchable(http, missing)
                return not missing

            await eventually(caught_up, "every acknowledged interaction searchable after the restarts")
            assert await backlog(http) == 0 or outbox_size(data_dir) == 0
    finally:
        server.kill()
    assert outbox_size(data_dir) == 0


def region_on(config: Path, path: Path, hanging_port: int | None = None) -> Path:
    """USA embedded at ``path``; with ``hanging_port``, DEU too, on OpenSearch that never answers."""
    text = f'home_region = "USA"\nsearch_deadline = 5.0\n\n[regions.USA]\nstore = "embedded"\npath = "{path}"\n'
    if hanging_port is not None:
        text += f'\n[regions.DEU]\nstore = "opensearch"\nhosts = ["http://127.0.0.1:{hanging_port}"]\n'
    config.write_text(text)
    return config


@pytest.mark.timeout(600)
async def test_a_full_region_neither_fails_nor_duplicates_memory_writes_and_catches_up_once_freed(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    """Memory on one disk, the region on a small tmpfs that fills up."""
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
    with mounted(tmp_path / "region", "-t", "tmpfs", "-o", "size=24m", "tmpfs") as region_dir:
        config = region_on(tmp_path / "regions.toml", region_dir / "USA")
        server = LiveServer(data_dir, env={**server_env, **BRIDGED}, config=config).start()
        try:
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                doomed = await new_conversation(http, "doomed")
                before = await add(http, doomed, "customer asked about a refund for the invoice")
                await eventually(lambda: searchable(http, before), "the first interaction indexed")

                filler = fill(region_dir)
                kept = await new_conversation(http, "kept")
                during = [await add(http, kept, f"customer router outage report {n}") for n in range(3)]
                assert await listed(http, kept) == during[::-1]  # each stored once, answered 200
                async with http.delete(f"{MEMORY}/{doomed}") as response:
                    assert response.status == 200, await response.text()
                async with http.delete(f"{MEMORY}/{doomed}") as response:
                    assert response.status == 404  # deleted; nobody needs to retry

                async def held_back() -> bool:
                    return await backlog(http) >= 2  # the index entries and the delete wait for space

                await eventually(held_back, "the backlog reported while the region is full")
                assert not await searchable(http, during[0])
                assert server.process is not None and server.process.poll() is None

                filler.unlink()  # space returns: the outbox catches up by itself

                async def caught_up() -> bool:
                    return not await all_searchable(http, during) and not await conversation_records(http, doomed)

                await eventually(caught_up, "the held-back writes and the delete applied")
                assert await listed(http, kept) == during[::-1]
                await eventually(lambda: _zero(backlog(http)), "the backlog drained")
        finally:
            server.kill()


async def _zero(value: Any) -> bool:
    return await value == 0


@pytest.mark.timeout(600)
async def test_a_hanging_region_holds_the_outbox_back_and_a_restart_without_it_applies_everything(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
    usa = tmp_path / "usa"
    env = {**server_env, **BRIDGED}
    config = region_on(tmp_path / "usa.toml", usa)
    with LiveServer(data_dir, env=env, config=config) as server:
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            doomed = await new_conversation(http, "doomed")
            before = await add(http, doomed, "customer asked about a roaming charge")
            await eventually(lambda: searchable(http, before), "indexed before the region hangs")
    with hanging_listener() as port:
        config = region_on(tmp_path / "hanging.toml", usa, hanging_port=port)
        server = LiveServer(data_dir, env=env, config=config).start()
        try:
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                kept = await new_conversation(http, "kept")
                during = await add(http, kept, "customer needs a technician appointment")
                async with http.delete(f"{MEMORY}/{doomed}") as response:
                    assert response.status == 200, await response.text()
                assert await listed(http, kept) == [during]

                async def held_back() -> bool:
                    return await backlog(http) >= 2

                await eventually(held_back, "the backlog reported while a region hangs")
        finally:
            server.kill()
    assert outbox_size(data_dir) >= 2
    with LiveServer(data_dir, env=env, config=region_on(tmp_path / "usa.toml", usa)) as server:
        async with aiohttp.ClientSession(server.url, headers=headers) as http:

            async def caught_up() -> bool:
                # and its entries deleted: they go once their effects are visible, so seeing those is not enough
                return (
                    await searchable(http, during)
                    and not await conversation_records(http, doomed)
                    and await backlog(http) == 0
                )

            await eventually(caught_up, "the outbox applied after the restart")
    assert outbox_size(data_dir) == 0
