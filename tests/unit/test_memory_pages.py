"""A page of interactions from the SQLite store: the owner's check and the page are one statement,
so an empty page must still tell "not yours or absent" (None) from "nothing here" ([])."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_plugin.auth import Principal
from memory_plugin.memory.models import Conversation, Interaction
from memory_plugin.memory.stores.sqlite import SqliteMemoryStore

ALICE = Principal("org-1", "alice")
START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    memory = SqliteMemoryStore(tmp_path / "memory.sqlite3")
    await memory.open()
    await memory.add_conversation(Conversation("c1", ALICE, "billing", START, START))
    await memory.add_conversation(Conversation("empty", ALICE, "nothing yet", START, START))
    for n in range(5):
        created = START + timedelta(seconds=n)
        info = {"n": n} if n == 2 else None
        await memory.add_interaction(Interaction(f"i{n}", "c1", ALICE, created, f"q{n}", f"a{n}", additional_info=info))
    # A trace is not an interaction of the conversation's list.
    await memory.add_interaction(
        Interaction("t1", "c1", ALICE, START, "trace", "x", parent_interaction_id="i0", trace_number=1)
    )
    yield memory
    await memory.close()


async def test_pages_come_newest_or_oldest_first_without_traces(store: SqliteMemoryStore) -> None:
    newest = await store.list_interactions(ALICE, "c1", 0, 3, newest_first=True)
    assert newest is not None and [i.interaction_id for i in newest] == ["i4", "i3", "i2"]
    oldest = await store.list_interactions(ALICE, "c1", 3, 10, newest_first=False)
    assert oldest is not None and [i.interaction_id for i in oldest] == ["i3", "i4"]


async def test_rows_read_back_as_written(store: SqliteMemoryStore) -> None:
    page = await store.list_interactions(ALICE, "c1", 2, 1, newest_first=True)
    assert page == [Interaction("i2", "c1", ALICE, START + timedelta(seconds=2), "q2", "a2", additional_info={"n": 2})]


@pytest.mark.parametrize(
    ("owner", "conversation_id", "offset", "expected"),
    [
        (ALICE, "empty", 0, []),  # the owner's conversation with no interactions
        (ALICE, "c1", 50, []),  # past the last page
        (Principal("org-1", "bob"), "c1", 0, None),  # another user's
        (Principal("org-2", "alice"), "c1", 0, None),  # another organisation's
        (Principal("org-1", None), "c1", 0, None),  # the organisation's admin key is not alice
        (ALICE, "missing", 0, None),
    ],
)
async def test_an_empty_page_tells_absent_from_empty(
    store: SqliteMemoryStore, owner: Principal, conversation_id: str, offset: int, expected: list[Interaction] | None
) -> None:
    assert await store.list_interactions(owner, conversation_id, offset, 10, newest_first=True) == expected
