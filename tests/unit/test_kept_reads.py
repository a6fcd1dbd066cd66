"""Point reads kept until a write ends: nothing older than an acknowledged write is ever answered."""

from __future__ import annotations

import asyncio

from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore
from memory_plugin.auth import Principal
from memory_plugin.ml.stores.sqlite import SqliteMLStore
from memory_plugin.sqlite import KeptReads

ALICE = Principal("org-1", "alice")


async def test_a_kept_read_is_answered_without_reading_again_until_a_write_ends():
    kept: KeptReads[str, int | None] = KeptReads()
    reads = []

    async def read(value: int | None) -> int | None:
        reads.append(value)
        return value

    assert await kept.get("a", lambda: read(1)) == 1
    assert await kept.get("a", lambda: read(2)) == 1
    assert await kept.get("none", lambda: read(None)) is None
    assert await kept.get("none", lambda: read(3)) is None  # an absence is kept too
    kept.forget()
    assert await kept.get("a", lambda: read(4)) == 4
    assert reads == [1, None, 4]


async def test_a_read_under_way_when_a_write_ends_is_answered_but_not_kept():
    kept: KeptReads[str, str] = KeptReads()
    started, release = asyncio.Event(), asyncio.Event()

    async def slow() -> str:
        started.set()
        await release.wait()
        return "before the write"

    pending = asyncio.create_task(kept.get("a", slow))
    await started.wait()
    kept.forget()  # the write ended while the read was under way
    release.set()
    assert await pending == "before the write"

    async def fresh() -> str:
        return "after the write"

    assert await kept.get("a", fresh) == "after the write"


async def test_kept_reads_stay_within_their_limit():
    kept: KeptReads[int, int] = KeptReads(limit=3)

    async def read(n: int) -> int:
        return n

    for n in range(10):
        assert await kept.get(n, lambda n=n: read(n)) == n
    assert len(kept) <= 3


async def test_a_container_read_follows_every_container_write(tmp_path):
    store = SqliteAgenticStore(tmp_path / "agentic.sqlite3")
    await store.open(8)
    try:
        assert await store.get_container(ALICE, "c1") is None
        assert await store.insert_container(ALICE, "c1", {"name": "one"}) is not None
        assert (await store.get_container(ALICE, "c1")).source["name"] == "one"
        await store.update_container(ALICE, "c1", lambda doc: {**doc, "name": "two"})
        assert (await store.get_container(ALICE, "c1")).source["name"] == "two"
        assert (await store.get_container(Principal("org-2", "alice"), "c1")) is None  # another organisation's
        await store.delete_container(ALICE, "c1")
        assert await store.get_container(ALICE, "c1") is None
    finally:
        await store.close()


async def test_a_model_read_follows_every_model_write(tmp_path):
    store = SqliteMLStore(tmp_path / "ml.sqlite3")
    await store.open()
    try:
        assert await store.get("model", ALICE, "m1") is None
        await store.create("model", ALICE, "m1", {"name": "one"})
        current = await store.get("model", ALICE, "m1")
        assert current is not None and current.source == {"name": "one"}
        assert await store.replace("model", ALICE, current, {"name": "two"})
        assert (await store.get("model", ALICE, "m1")).source == {"name": "two"}
        await store.delete("model", ALICE, "m1")
        assert await store.get("model", ALICE, "m1") is None
        await store.create("model", ALICE, "m1", {"name": "three"})
        assert await store.erase(ALICE) == 1
        assert await store.get("model", ALICE, "m1") is None
    finally:
        await store.close()
