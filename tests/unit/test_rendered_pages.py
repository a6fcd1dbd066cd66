"""RenderedPages: a page is served only at the version it was rendered at, within a memory budget."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memory_plugin.auth import Principal
from memory_plugin.clock import now
from memory_plugin.memory.models import Conversation, Interaction
from memory_plugin.memory.pages import RenderedPages
from memory_plugin.memory.stores.sqlite import SqliteMemoryStore, Versions

KIB = 1024


def test_a_page_is_served_only_at_its_version() -> None:
    pages = RenderedPages(64 * KIB)
    pages.put("a", 1, b"one")
    assert pages.get("a", 1) == b"one"
    assert pages.get("a", 2) is None, "the data moved on"
    assert pages.get("b", 1) is None
    pages.put("a", 2, b"two")
    assert pages.get("a", 2) == b"two" and pages.get("a", 1) is None and len(pages) == 1


def test_a_store_that_cannot_tell_keeps_nothing() -> None:
    pages = RenderedPages(64 * KIB)
    pages.put("a", None, b"one")
    assert len(pages) == 0 and pages.get("a", None) is None


def test_the_least_recently_used_pages_go_first_and_the_budget_holds() -> None:
    pages = RenderedPages(8 * KIB)
    body = b"x" * (KIB - RenderedPages.OVERHEAD)  # a page costs 1 KiB with its overhead
    for n in range(8):
        pages.put(n, 0, body)
    assert pages.get(0, 0) == body  # 0 is now the most recently used
    pages.put(8, 0, body)
    assert pages.get(1, 0) is None, "the least recently used page went"
    assert pages.get(0, 0) == body and pages.get(8, 0) == body
    assert pages.size <= 8 * KIB and len(pages) == 8
    pages.put(0, 1, b"small")  # replacing a page gives its memory back
    assert pages.size == 7 * KIB + len(b"small") + RenderedPages.OVERHEAD


def test_a_page_over_an_eighth_of_the_budget_is_never_kept() -> None:
    pages = RenderedPages(8 * KIB)
    pages.put("big", 0, b"x" * (KIB + 1))
    assert len(pages) == 0 and pages.size == 0
    assert len(RenderedPages(0)) == 0


async def test_render_runs_once_per_version() -> None:
    pages, renders = RenderedPages(64 * KIB), []

    async def render() -> dict[str, int]:
        renders.append(1)
        return {"n": len(renders)}

    for version in (1, 1, 2, 2):
        response = await pages.json("k", version, render)
        assert response.content_type == "application/json"
    assert len(renders) == 2 and pages.get("k", 2) == b'{"n": 2}'


def test_versions_move_per_conversation_and_all_at_once() -> None:
    versions = Versions()
    before = versions.of("c1")
    versions.bump("c1")
    assert versions.of("c1") == before + 1
    others = [f"c{n}" for n in range(2, 200)]
    unrelated = [c for c in others if hash(c) % Versions.SLOTS != hash("c1") % Versions.SLOTS]
    assert unrelated and all(versions.of(c) == 0 for c in unrelated)
    versions.bump_all()
    assert versions.of("c1") == before + 2 and all(versions.of(c) == 1 for c in unrelated)


async def test_a_write_whose_caller_left_still_moves_the_version(tmp_path: Path) -> None:
    """A cancelled request's interaction still commits: the pages of its conversation must not outlive it."""
    store = SqliteMemoryStore(tmp_path / "memory.sqlite3")
    await store.open()
    try:
        alice = Principal("org-1", "alice")
        await store.add_conversation(Conversation("c1", alice, "billing", now(), now()))
        before = await store.messages_version("c1")
        write = asyncio.ensure_future(store.add_interaction(Interaction("i1", "c1", alice, now(), "q", "a")))
        await asyncio.sleep(0)  # queued on the writer's thread
        write.cancel()
        await store.update_conversation(alice, "c1", {"name": "after"})  # writes run in order: i1 is settled
        assert await store.messages_version("c1") != before
        listed = await store.list_interactions(alice, "c1", 0, 10, newest_first=True)
        assert listed is not None and [i.interaction_id for i in listed] == ["i1"]
    finally:
        await store.close()
