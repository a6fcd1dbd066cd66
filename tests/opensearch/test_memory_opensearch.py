"""The conversational memory with the home region on a real OpenSearch cluster.

The 2.11 and 2.12+ HTTP suites (``tests/http/test_memory_v211.py`` and ``test_memory_v212.py``) run on
OpenSearch as their ``opensearch`` backend.  Here, what only a cluster shows:

- that the in-process app really keeps its conversations in the home region's indices;
- ``OpenSearchMemoryStore`` directly: owner isolation, ordering and paging, deep pages
  through ``search_after``, races, and the same scenario run on ``SqliteMemoryStore``
  (the reference) with identical answers.

Every test gets its own index prefix, so tests never see each other's data; the indices
are deleted afterwards.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opensearchpy.exceptions import TransportError

from memory_plugin.auth import Principal
from memory_plugin.memory.models import Conversation, Interaction
from memory_plugin.memory.routes_v211 import MEMORY
from memory_plugin.memory.stores.opensearch import OpenSearchMemoryStore
from memory_plugin.memory.stores.opensearch_schema import META_MAPPINGS, SCHEMA_VERSION
from memory_plugin.memory.stores.sqlite import SqliteMemoryStore
from memory_plugin.settings import OpenSearchRegion
from tests.http.test_memory_v211 import create_conversation, create_interaction

pytestmark = [pytest.mark.opensearch, pytest.mark.backends("opensearch")]


def _new_prefix() -> str:
    return f"mp-mem-{uuid.uuid4().hex[:12]}"


def _drop_indices(node, prefix: str) -> None:  # type: ignore[no-untyped-def]
    node.request("DELETE", f"/{prefix}-*")


@pytest.fixture
def index_prefix(opensearch_nodes):  # type: ignore[no-untyped-def]
    prefix = _new_prefix()
    yield prefix
    _drop_indices(opensearch_nodes[0], prefix)


# -- the 2.11 HTTP suite runs on OpenSearch from tests/http/test_memory_v211.py (its ``backend`` param) -----


async def test_in_process_suite_really_runs_on_opensearch(client, alice, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    store = client.app[MEMORY].store
    assert isinstance(store, OpenSearchMemoryStore)
    assert store.meta_index == f"{index_prefix}-memory-meta"
    conversation_id = await create_conversation(client, alice, "on the cluster")
    interaction_id = await create_interaction(client, alice, conversation_id)
    status, meta = opensearch_nodes[0].request("GET", f"/{index_prefix}-memory-meta/_doc/{conversation_id}")
    assert status == 200, meta
    assert meta["_source"]["name"] == "on the cluster"
    assert meta["_source"]["memory_plugin"]["organization_id"] == "org-1" and meta["_source"]["user"] == "alice"
    status, message = opensearch_nodes[0].request("GET", f"/{index_prefix}-memory-message/_doc/{interaction_id}")
    assert status == 200, message
    assert message["_source"]["memory_id"] == conversation_id
    assert message["_source"]["memory_plugin"]["additional_info_json"] == '"[Document1, Document2]"'


# -- OpenSearchMemoryStore directly -------------------------------------------------------------

ALICE = Principal("org-1", "alice")
BOB = Principal("org-1", "bob")
CAROL = Principal("org-2", "alice")  # same user name, other organisation
ADMIN = Principal("org-1", None)

T0 = datetime(2026, 5, 28, 12, 0, 0, tzinfo=UTC)


def at(micros: int) -> datetime:
    return T0 + timedelta(microseconds=micros)


def conversation(
    cid: str, owner: Principal, created: datetime, name: str = "", info: dict | None = None
) -> Conversation:
    return Conversation(cid, owner, name, created, created, info)


def interaction(
    iid: str,
    cid: str,
    owner: Principal,
    created: datetime,
    *,
    info=None,  # type: ignore[no-untyped-def]
    parent: str | None = None,
    trace: int | None = None,
) -> Interaction:
    return Interaction(iid, cid, owner, created, f"in {iid}", f"out {iid}", "tmpl", "origin", info, parent, trace)


#: A ``_search`` body for everything a principal may see.
EVERYTHING = {"query": {"match_all": {}}, "size": 1000}


async def searched(search: Awaitable[dict[str, Any]]) -> list[str]:
    """The hit ids of a ``_search``, by id."""
    return sorted(hit["_id"] for hit in (await search)["hits"]["hits"])


async def documents(search: Awaitable[dict[str, Any]]) -> list[tuple[str, Any]]:
    """The hits of a ``_search`` as ``(id, _source)``, by id: what either store must answer alike."""
    return sorted((hit["_id"], hit["_source"]) for hit in (await search)["hits"]["hits"])


@pytest.fixture
async def store(opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    opened = OpenSearchMemoryStore(OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix))
    await opened.open()
    yield opened
    await opened.close()


@pytest.fixture
async def sqlite_store(tmp_path):  # type: ignore[no-untyped-def]
    opened = SqliteMemoryStore(tmp_path / "reference.sqlite3")
    await opened.open()
    yield opened
    await opened.close()


async def test_writes_refresh_without_waiting_for_merges_in_new_and_older_indices(
    store, opensearch_nodes, index_prefix
):  # type: ignore[no-untyped-def]
    node = opensearch_nodes[0]

    def merging_on_flush() -> dict[str, str]:
        status, settings = node.request("GET", f"/{index_prefix}-memory-*/_settings/index.merge_on_flush.enabled")
        assert status == 200
        return {name: found["settings"]["index"]["merge_on_flush"]["enabled"] for name, found in settings.items()}

    names = [f"{index_prefix}-memory-message-v2", f"{index_prefix}-memory-meta-v2"]
    assert merging_on_flush() == dict.fromkeys(names, "false")  # made so
    on = {"index": {"merge_on_flush": {"enabled": True}}}
    assert node.request("PUT", f"/{index_prefix}-memory-*/_settings", on)[0] == 200
    again = OpenSearchMemoryStore(store.settings)
    await again.open()  # indices made before the setting get it on open
    await again.close()
    assert merging_on_flush() == dict.fromkeys(names, "false")


async def test_open_is_idempotent_and_creates_ml_commons_like_indices(store, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    again = OpenSearchMemoryStore(store.settings)
    await again.open()  # the indices exist already
    await again.close()
    status, mappings = opensearch_nodes[0].request("GET", f"/{index_prefix}-memory-*/_mapping")
    assert status == 200
    assert sorted(mappings) == [f"{index_prefix}-memory-message-v2", f"{index_prefix}-memory-meta-v2"]
    meta = mappings[f"{index_prefix}-memory-meta-v2"]["mappings"]["properties"]
    message = mappings[f"{index_prefix}-memory-message-v2"]["mappings"]["properties"]
    # ml-commons' own fields exactly as ml-commons 2.19.1 maps them ...
    assert meta["name"] == {"type": "text"}
    assert meta["create_time"] == {"type": "date", "format": "strict_date_time||epoch_millis"}
    assert meta["user"]["type"] == "keyword" and meta["additional_info"]["type"] == "flat_object"
    assert message["memory_id"]["type"] == "keyword" and message["trace_number"]["type"] == "long"
    assert message["additional_info"]["type"] == "flat_object" and message["input"] == {"type": "text"}
    # ... and ours under one object, which searches may not name.
    assert set(meta) - {"memory_plugin"} == {
        "name",
        "create_time",
        "updated_time",
        "user",
        "application_type",
        "additional_info",
    }
    assert meta["memory_plugin"]["properties"]["organization_id"]["type"] == "keyword"
    assert message["memory_plugin"]["properties"]["create_time"]["type"] == "date_nanos"
    status, settings = opensearch_nodes[0].request("GET", f"/{index_prefix}-memory-meta/_settings")
    index_settings = settings[f"{index_prefix}-memory-meta-v2"]["settings"]["index"]
    assert index_settings["number_of_replicas"] == "0"
    assert "memory_plugin" not in str(index_settings["query"]["default_field"])
    assert await store.health() == {"status": "green", "conversations": 0}


async def test_another_owner_sees_nothing(store):  # type: ignore[no-untyped-def]
    await store.add_conversation(conversation("c-alice", ALICE, at(1), "mine"))
    assert await store.add_interaction(interaction("i-1", "c-alice", ALICE, at(2)))
    assert await store.add_interaction(interaction("t-1", "c-alice", ALICE, at(3), parent="i-1", trace=1))
    for other in (BOB, CAROL, ADMIN):
        assert await store.get_conversation(other, "c-alice") is None
        assert await store.list_conversations(other, 0, 10) == []
        assert await store.list_conversations(other, 0, 10, "updated_time") == []
        assert await store.update_conversation(other, "c-alice", {"name": "pwned", "updated_time": at(9)}) is None
        assert not await store.add_interaction(
            interaction(f"x-{other.organization_id}-{other.user_id}", "c-alice", other, at(4))
        )
        assert await store.get_interaction(other, "i-1") is None
        assert await store.list_interactions(other, "c-alice", 0, 10, True) is None
        assert await store.list_traces(other, "i-1", 0, 10) is None
        assert await store.update_interaction(other, "i-1", {"response": "pwned"}) is None
        assert await searched(store.search_conversations(other, EVERYTHING)) == []
        assert await searched(store.search_interactions(other, "c-alice", EVERYTHING)) == []
        assert await store.delete_conversation(other, "c-alice") is None
    # Nothing changed for the owner, and the refused interactions were never written.
    mine = await store.get_conversation(ALICE, "c-alice")
    assert mine is not None and mine.name == "mine" and mine.updated_time == at(3)
    assert await searched(store.search_interactions(ALICE, "c-alice", EVERYTHING)) == ["i-1", "t-1"]
    assert await searched(store.search_interactions(ALICE, "x-org-1-bob", EVERYTHING)) == []
    assert (await store.get_interaction(ALICE, "i-1")).response == "out i-1"  # type: ignore[union-attr]
    # An organisation-wide principal (no user) has its own, separate memory.
    await store.add_conversation(conversation("c-admin", ADMIN, at(5)))
    assert [c.conversation_id for c in await store.list_conversations(ADMIN, 0, 10)] == ["c-admin"]
    assert (await store.get_conversation(ADMIN, "c-admin")).owner == ADMIN  # type: ignore[union-attr]
    assert [c.conversation_id for c in await store.list_conversations(ALICE, 0, 10)] == ["c-alice"]


async def test_current_interactions_reads_in_one_request_and_keeps_ownership(store, sqlite_store):  # type: ignore[no-untyped-def]
    """The bridge's re-read: as get_interaction, each, in order; a gone or foreign one is None."""
    for opened in (store, sqlite_store):
        await opened.add_conversation(conversation("c", ALICE, at(1)))
        for n in range(3):
            assert await opened.add_interaction(interaction(f"i{n}", "c", ALICE, at(n + 2)))
        changed = await opened.update_interaction(ALICE, "i1", {"response": "changed"})
        assert changed is not None
        asked = [
            interaction("i2", "c", ALICE, at(4)),
            interaction("i1", "c", ALICE, at(3)),
            interaction("i0", "c", BOB, at(2)),  # not Bob's
            interaction("never", "c", ALICE, at(5)),
            interaction("i2", "c", ALICE, at(4)),  # asked twice
        ]
        current = await opened.current_interactions(asked)
        assert current == [await opened.get_interaction(i.owner, i.interaction_id) for i in asked]
        assert [None if i is None else i.response for i in current] == ["out i2", "changed", None, None, "out i2"]
    assert await store.current_interactions([]) == []


async def test_conversations_newest_first_ties_by_id_desc(store):  # type: ignore[no-untyped-def]
    # Same millisecond, different microseconds; and exact ties broken by id.
    await store.add_conversation(conversation("b", ALICE, at(1)))
    await store.add_conversation(conversation("a", ALICE, at(2)))
    await store.add_conversation(conversation("d", ALICE, at(2)))
    await store.add_conversation(conversation("c", ALICE, at(2)))
    await store.add_conversation(conversation("e", ALICE, at(0)))
    ids = [c.conversation_id for c in await store.list_conversations(ALICE, 0, 10)]
    assert ids == ["d", "c", "a", "b", "e"]
    assert [c.conversation_id for c in await store.list_conversations(ALICE, 1, 2)] == ["c", "a"]
    assert await store.list_conversations(ALICE, 5, 2) == []
    # A message moves updated_time: "e" becomes the most recently updated.
    assert await store.add_interaction(interaction("m", "e", ALICE, at(10)))
    assert [c.conversation_id for c in await store.list_conversations(ALICE, 0, 2, "updated_time")] == ["e", "d"]
    assert [c.conversation_id for c in await store.list_conversations(ALICE, 0, 10)] == ids


async def test_interactions_and_traces_order(store):  # type: ignore[no-untyped-def]
    await store.add_conversation(conversation("c", ALICE, at(0)))
    for iid, micros in (("i2", 2), ("i1", 1), ("i3", 2), ("i0", 5)):
        assert await store.add_interaction(interaction(iid, "c", ALICE, at(micros)))
    assert await store.add_interaction(interaction("t2", "c", ALICE, at(6), parent="i1", trace=2))
    assert await store.add_interaction(interaction("t1", "c", ALICE, at(7), parent="i1", trace=1))
    assert await store.add_interaction(interaction("t0", "c", ALICE, at(8), parent="i1", trace=1))
    # Traces are never listed as interactions.
    oldest = [i.interaction_id for i in await store.list_interactions(ALICE, "c", 0, 10, False)]
    newest = [i.interaction_id for i in await store.list_interactions(ALICE, "c", 0, 10, True)]
    assert oldest == ["i1", "i2", "i3", "i0"]
    assert newest == ["i0", "i3", "i2", "i1"]
    assert [i.interaction_id for i in await store.list_interactions(ALICE, "c", 1, 2, True)] == ["i3", "i2"]
    traces = await store.list_traces(ALICE, "i1", 0, 10)
    assert [(t.interaction_id, t.trace_number) for t in traces] == [("t1", 1), ("t0", 1), ("t2", 2)]
    assert [t.interaction_id for t in await store.list_traces(ALICE, "i1", 2, 5)] == ["t2"]
    assert await store.list_traces(ALICE, "i2", 0, 10) == []
    assert await store.list_traces(ALICE, "nope", 0, 10) is None
    assert await store.list_interactions(ALICE, "nope", 0, 10, True) is None
    assert (await store.get_conversation(ALICE, "c")).updated_time == at(8)  # type: ignore[union-attr]


async def test_updated_time_only_moves_forward(store):  # type: ignore[no-untyped-def]
    await store.add_conversation(conversation("c", ALICE, at(0)))
    assert await store.update_conversation(ALICE, "c", {"updated_time": at(100)})
    assert await store.add_interaction(interaction("late", "c", ALICE, at(50)))
    assert (await store.get_conversation(ALICE, "c")).updated_time == at(100)  # type: ignore[union-attr]
    assert not await store.add_interaction(interaction("x", "unknown", ALICE, at(60)))
    assert await store.get_interaction(ALICE, "x") is None


async def test_concurrent_messages_lose_no_update(store):  # type: ignore[no-untyped-def]
    await store.add_conversation(conversation("c", ALICE, at(0)))
    results = await asyncio.gather(
        *(store.add_interaction(interaction(f"i{n:02d}", "c", ALICE, at(n + 1))) for n in range(20))
    )
    assert all(results)
    assert (await store.get_conversation(ALICE, "c")).updated_time == at(20)  # type: ignore[union-attr]
    assert len(await store.list_interactions(ALICE, "c", 0, 100, False)) == 20  # type: ignore[arg-type]


async def test_updates_merge_as_a_partial_document_update(store):  # type: ignore[no-untyped-def]
    """As the real node's partial update: fields replace, maps merge, ``_version`` counts writes, no change is a noop."""
    await store.add_conversation(conversation("c", ALICE, at(0), "old", {"a": "1", "b": "2"}))
    updated = await store.update_conversation(
        ALICE, "c", {"name": "new", "additional_info": {"c": "3"}, "updated_time": at(7)}
    )
    merged = Conversation("c", ALICE, "new", at(0), at(7), {"a": "1", "b": "2", "c": "3"}, version=2)
    assert updated is not None and updated.result == "updated" and updated.document == merged
    assert await store.get_conversation(ALICE, "c") == merged
    assert await store.add_interaction(interaction("i", "c", ALICE, at(9), info={"x": "1", "y": "2"}))
    changed = await store.update_interaction(ALICE, "i", {"response": "better", "additional_info": {"z": "3"}})
    assert changed is not None and changed.result == "updated"
    assert changed.document.response == "better" and changed.document.additional_info == {"x": "1", "y": "2", "z": "3"}
    assert await store.get_interaction(ALICE, "i") == changed.document
    unchanged = await store.update_interaction(ALICE, "i", {"response": "better"})
    assert unchanged is not None and unchanged.result == "noop" and unchanged.document == changed.document
    assert await store.update_interaction(ALICE, "nope", {"response": "x"}) is None


@pytest.mark.parametrize(
    "info",
    [
        None,
        "",
        "[Document1, Document2]",
        '{"already": "json text"}',
        {},
        {"k": "v", "a.b": "dotted", "": "", "unicode": "grüße 👋"},
        {"big": "x" * 40000},  # too big to index in the flat_object: kept in the JSON copy only
    ],
)
async def test_additional_info_round_trips_exactly(store, info):  # type: ignore[no-untyped-def]
    await store.add_conversation(conversation("c", ALICE, at(0), info=info if isinstance(info, dict) else None))
    assert await store.add_interaction(interaction("i", "c", ALICE, at(1), info=info))
    got = await store.get_interaction(ALICE, "i")
    assert got is not None and got.additional_info == info and type(got.additional_info) is type(info)
    (listed,) = await store.list_interactions(ALICE, "c", 0, 1, True)  # type: ignore[misc]
    assert listed.additional_info == info
    meta = await store.get_conversation(ALICE, "c")
    assert meta is not None and meta.additional_info == (info if isinstance(info, dict) else None)


async def test_delete_returns_interaction_ids_and_removes_everything(store):  # type: ignore[no-untyped-def]
    await store.add_conversation(conversation("c", ALICE, at(0)))
    await store.add_conversation(conversation("keep", ALICE, at(0)))
    for n in range(3):
        assert await store.add_interaction(interaction(f"i{n}", "c", ALICE, at(n + 1)))
    assert await store.add_interaction(interaction("t", "c", ALICE, at(9), parent="i0", trace=1))
    assert await store.add_interaction(interaction("other", "keep", ALICE, at(9)))
    assert sorted(await store.delete_conversation(ALICE, "c")) == ["i0", "i1", "i2", "t"]  # type: ignore[arg-type]
    assert await store.get_conversation(ALICE, "c") is None
    assert await store.get_interaction(ALICE, "i0") is None
    assert await store.list_interactions(ALICE, "c", 0, 10, True) is None
    assert await searched(store.search_interactions(ALICE, "c", EVERYTHING)) == []
    assert await searched(store.search_interactions(ALICE, "keep", EVERYTHING)) == ["other"]
    assert await store.delete_conversation(ALICE, "c") is None
    assert await store.delete_conversation(ALICE, "keep") == ["other"]
    await store.add_conversation(conversation("empty", ALICE, at(0)))
    assert await store.delete_conversation(ALICE, "empty") == []


async def test_pages_beyond_the_result_window_use_search_after(store):  # type: ignore[no-untyped-def]
    store.max_result_window = 3  # as if index.max_result_window were 3
    await store.add_conversation(conversation("c", ALICE, at(0)))
    for n in range(8):
        await store.add_conversation(conversation(f"c{n}", ALICE, at(n // 2 + 1)))  # pairs of ties
        assert await store.add_interaction(interaction(f"i{n}", "c", ALICE, at(n // 3 + 1)))
    expected = ["c7", "c6", "c5", "c4", "c3", "c2", "c1", "c0", "c"]
    for offset in range(10):
        for limit in (1, 2, 3, 4, 7, 20):
            got = [c.conversation_id for c in await store.list_conversations(ALICE, offset, limit)]
            assert got == expected[offset : offset + limit], (offset, limit)
    oldest = [f"i{n}" for n in range(8)]
    assert [i.interaction_id for i in await store.list_interactions(ALICE, "c", 2, 5, False)] == oldest[2:7]  # type: ignore[union-attr]
    assert [i.interaction_id for i in await store.list_interactions(ALICE, "c", 4, 4, True)] == oldest[::-1][4:8]  # type: ignore[union-attr]
    assert len(await searched(store.search_conversations(ALICE, EVERYTHING))) == 9
    assert len(await searched(store.search_interactions(ALICE, "c", EVERYTHING))) == 8
    assert sorted(await store.delete_conversation(ALICE, "c")) == oldest  # type: ignore[arg-type]


async def _scenario(store) -> list[object]:  # type: ignore[no-untyped-def]
    """The same calls on any MemoryStore; every answer, for comparison."""
    answers: list[object] = []
    record = answers.append
    owners = (ALICE, BOB, CAROL, ADMIN)
    for n in range(12):
        owner = owners[n % 4]
        await store.add_conversation(
            conversation(f"c{n:02d}", owner, at(n // 3), f"name {n}", {"n": str(n)} if n % 2 else None)
        )
    for n in range(30):
        cid = f"c{n % 6:02d}"
        owner = owners[(n % 6) % 4]
        parent, trace = (f"i{n - 6:02d}", n % 3 if n % 5 else None) if n >= 6 and n % 4 == 0 else (None, None)
        info = {"turn": str(n)} if n % 3 == 0 else (f"raw {n}" if n % 3 == 1 else None)
        record(
            await store.add_interaction(
                interaction(f"i{n:02d}", cid, owner, at(10 + n // 4), info=info, parent=parent, trace=trace)
            )
        )
    record(await store.add_interaction(interaction("stranger", "c00", BOB, at(99))))
    record(await store.update_conversation(ALICE, "c04", {"name": "renamed", "updated_time": at(5)}))
    record(await store.update_conversation(BOB, "c04", {"name": "stolen", "updated_time": at(6)}))
    record(await store.update_interaction(ALICE, "i00", {"response": "changed", "additional_info": {"x": "y"}}))
    record(await store.update_interaction(CAROL, "i00", {"response": "stolen"}))
    record(await store.delete_conversation(BOB, "c05"))
    record(await store.delete_conversation(ALICE, "c05"))
    for owner in owners:
        for by in ("create_time", "updated_time"):
            for offset, limit in ((0, 1), (0, 3), (1, 2), (2, 10), (4, 1)):
                record(await store.list_conversations(owner, offset, limit, by))
        record(await documents(store.search_conversations(owner, EVERYTHING)))
        for n in range(7):
            cid = f"c{n:02d}"
            record(await store.get_conversation(owner, cid))
            for newest_first in (True, False):
                for offset, limit in ((0, 2), (1, 3), (0, 10)):
                    record(await store.list_interactions(owner, cid, offset, limit, newest_first))
            record(await documents(store.search_interactions(owner, cid, EVERYTHING)))
        for n in range(31):
            iid = f"i{n:02d}"
            record(await store.get_interaction(owner, iid))
            record(await store.list_traces(owner, iid, 0, 10))
            record(await store.list_traces(owner, iid, 1, 1))
    return answers


async def test_same_answers_as_the_sqlite_reference(store, sqlite_store):  # type: ignore[no-untyped-def]
    expected = await _scenario(sqlite_store)
    got = await _scenario(store)
    assert len(got) == len(expected)
    for index, (mine, reference) in enumerate(zip(got, expected, strict=True)):
        assert mine == reference, f"answer {index} differs"


# -- schema 1 indices are migrated ------------------------------------------------------------

_V1_KEYWORD = {"type": "keyword"}
_V1_DATE = {"type": "date_nanos"}
_V1_UNINDEXED = {"type": "keyword", "index": False, "doc_values": False}
#: The mappings before the ml-commons ones (schema 1), as the store created them.
V1_META = {
    "dynamic": "strict",
    "properties": {
        "memory_id": _V1_KEYWORD,
        "name": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
        "create_time": _V1_DATE,
        "updated_time": _V1_DATE,
        "user": _V1_KEYWORD,
        "organization_id": _V1_KEYWORD,
        "application_type": _V1_KEYWORD,
        "additional_info": {"type": "flat_object"},
        "additional_info_json": _V1_UNINDEXED,
    },
}
V1_MESSAGE = {
    "dynamic": "strict",
    "properties": {
        "message_id": _V1_KEYWORD,
        "memory_id": _V1_KEYWORD,
        "create_time": _V1_DATE,
        "input": {"type": "text"},
        "prompt_template": {"type": "text"},
        "response": {"type": "text"},
        "origin": {"type": "keyword", "ignore_above": 8191},
        "additional_info": {"type": "flat_object"},
        "additional_info_json": _V1_UNINDEXED,
        "parent_message_id": _V1_KEYWORD,
        "trace_number": {"type": "long"},
        "user": _V1_KEYWORD,
        "organization_id": _V1_KEYWORD,
    },
}


def _v1_meta(cid: str, owner: Principal, micros: int, name: str, info: object) -> dict[str, object]:
    time = (T0 + timedelta(microseconds=micros)).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return {
        "memory_id": cid,
        "name": name,
        "create_time": time,
        "updated_time": time,
        "user": owner.user_id or "",
        "organization_id": owner.organization_id,
        "additional_info": info if isinstance(info, dict) else None,
        "additional_info_json": None if info is None else json.dumps(info),
    }


async def test_schema_1_indices_are_migrated_behind_an_alias(opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    node = opensearch_nodes[0]
    for suffix, mappings in (("meta", V1_META), ("message", V1_MESSAGE)):
        body = {"settings": {"index": {"number_of_shards": 1, "number_of_replicas": 0}}, "mappings": mappings}
        status, created = node.request("PUT", f"/{index_prefix}-memory-{suffix}", body)
        assert status == 200, created
    old = {
        "c1": _v1_meta("c1", ALICE, 1, "router plans", {"k": "v"}),
        "c2": _v1_meta("c2", ALICE, 2, "second", "a 2.11 string"),
        "c3": _v1_meta("c3", ADMIN, 3, "router admin", None),
    }
    for cid, source in old.items():
        status, written = node.request("PUT", f"/{index_prefix}-memory-meta/_doc/{cid}?refresh=true", source)
        assert status == 201, written
    message = {
        "message_id": "m1",
        "memory_id": "c1",
        "create_time": old["c1"]["create_time"],
        "input": "why blink",
        "prompt_template": None,
        "response": "the router",
        "origin": "o",
        "additional_info": None,
        "additional_info_json": '"raw"',
        "parent_message_id": None,
        "trace_number": None,
        "user": "alice",
        "organization_id": "org-1",
    }
    status, written = node.request("PUT", f"/{index_prefix}-memory-message/_doc/m1?refresh=true", message)
    assert status == 201, written

    store = OpenSearchMemoryStore(OpenSearchRegion(hosts=(node.url,), index_prefix=index_prefix))
    await store.open()
    try:
        again = OpenSearchMemoryStore(store.settings)
        await again.open()  # already migrated: nothing to do
        await again.close()
        status, aliases = node.request("GET", f"/{index_prefix}-memory-*/_alias")
        assert aliases == {
            f"{index_prefix}-memory-meta-v2": {"aliases": {f"{index_prefix}-memory-meta": {}}},
            f"{index_prefix}-memory-message-v2": {"aliases": {f"{index_prefix}-memory-message": {}}},
        }
        assert [c.conversation_id for c in await store.list_conversations(ALICE, 0, 10)] == ["c2", "c1"]
        first = await store.get_conversation(ALICE, "c1")
        assert first is not None and first.name == "router plans" and first.additional_info == {"k": "v"}
        assert first.create_time == T0 + timedelta(microseconds=1)
        assert (await store.get_conversation(ALICE, "c2")).additional_info == "a 2.11 string"  # type: ignore[union-attr]
        assert await store.get_conversation(ALICE, "c3") is None
        assert (await store.get_conversation(ADMIN, "c3")).owner == ADMIN  # type: ignore[union-attr]
        got = await store.get_interaction(ALICE, "m1")
        assert got is not None and got.input == "why blink" and got.additional_info == "raw"
        found = await store.search_conversations(ALICE, {"query": {"term": {"name": "router"}}})
        assert [hit["_id"] for hit in found["hits"]["hits"]] == ["c1"]
        messages = await store.search_interactions(ALICE, "c1", {"query": {"match": {"response": "router"}}})
        assert [hit["_id"] for hit in messages["hits"]["hits"]] == ["m1"]
        assert messages["hits"]["hits"][0]["_source"]["additional_info"] == {"additional_info": "raw"}  # as on SQLite
    finally:
        await store.close()


def counted_requests(store: OpenSearchMemoryStore) -> list[str]:
    """Every request ``store`` sends from now on, as ``"METHOD path"``."""
    calls: list[str] = []
    transport = store.client.transport
    original = transport.perform_request

    async def perform(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(f"{method} {url}")
        return await original(method, url, *args, **kwargs)

    transport.perform_request = perform  # type: ignore[method-assign]
    return calls


async def test_messages_added_together_are_written_together(store, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    """Writers of one memory in two processes: each process writes its group as one ``_mget`` and two
    ``_bulk`` requests (messages, then the bumps), with no read-modify-write and no conflict to retry."""
    other = OpenSearchMemoryStore(OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix))
    await other.open()
    try:
        await store.add_conversation(conversation("c", ALICE, at(0)))
        ours, theirs = counted_requests(store), counted_requests(other)
        adds = [
            (store, other)[n % 2].add_interaction(interaction(f"i{n:02d}", "c", ALICE, at(n + 1))) for n in range(32)
        ]
        unknown = store.add_interaction(interaction("x", "unknown", ALICE, at(99)))
        assert await asyncio.gather(*adds, unknown) == [True] * 32 + [False]
        for calls in (ours, theirs):
            assert [call.split("?")[0].rsplit("/", 1)[-1] for call in calls] == ["_mget", "_bulk", "_bulk"], calls
        assert (await store.get_conversation(ALICE, "c")).updated_time == at(32)  # type: ignore[union-attr]
        assert len(await store.list_interactions(ALICE, "c", 0, 100, False)) == 32  # type: ignore[arg-type]
        assert await store.get_interaction(ALICE, "x") is None
    finally:
        await other.close()


async def test_each_added_message_is_answered_by_its_own_item(store):  # type: ignore[no-untyped-def]
    """In one group, a message whose create fails fails alone: the others are acknowledged, the bump is theirs."""
    await store.add_conversation(conversation("c", ALICE, at(0)))
    assert await store.add_interaction(interaction("taken", "c", ALICE, at(1)))
    results = await asyncio.gather(
        store.add_interaction(interaction("new", "c", ALICE, at(2))),
        store.add_interaction(interaction("taken", "c", ALICE, at(5))),
        return_exceptions=True,
    )
    assert results[0] is True
    assert isinstance(results[1], TransportError) and results[1].status_code == 409, results
    assert (await store.get_conversation(ALICE, "c")).updated_time == at(2)  # type: ignore[union-attr]
    assert (await store.get_interaction(ALICE, "taken")).create_time == at(1)  # type: ignore[union-attr]


async def test_a_page_of_messages_is_one_request_that_also_proves_the_memory_the_callers(store):  # type: ignore[no-untyped-def]
    """A page within the result window is one ``_msearch``: the memory, searched by id and owner, and the page.
    Whoever does not own the memory, or asks after it is gone, gets None (404) as after a get, never its page."""
    await store.add_conversation(conversation("c", ALICE, at(0)))
    await store.add_conversation(conversation("empty", ALICE, at(0)))
    for n in range(3):
        assert await store.add_interaction(interaction(f"i{n}", "c", ALICE, at(n + 1)))
    calls = counted_requests(store)
    page = await store.list_interactions(ALICE, "c", 1, 10, True)
    assert [found.interaction_id for found in page] == ["i1", "i0"]  # type: ignore[union-attr]
    assert [call.split("?")[0].rsplit("/", 1)[-1] for call in calls] == ["_msearch"], calls
    assert await store.list_interactions(ALICE, "empty", 0, 10, True) == []
    assert await store.list_interactions(ALICE, "c", 5, 10, True) == []  # past the last message: still ours
    for other in (BOB, CAROL, ADMIN):
        assert await store.list_interactions(other, "c", 0, 10, True) is None
    assert await store.list_interactions(ALICE, "unknown", 0, 10, True) is None
    assert await store.list_interactions(ALICE, "x" * 513, 0, 10, True) is None  # no id is that long
    assert await store.delete_conversation(ALICE, "c") == ["i0", "i1", "i2"]
    assert await store.list_interactions(ALICE, "c", 0, 10, True) is None


@pytest.mark.parametrize(
    "failing",
    [
        {"error": {"type": "no_shard_available_action_exception"}, "status": 503},
        {"_shards": {"total": 2, "successful": 1, "failed": 1}, "hits": {"total": {"value": 0}, "hits": []}},
    ],
    ids=["error", "failed-shard"],
)
async def test_a_page_whose_msearch_fails_is_asked_again_as_a_get_and_a_search(store, monkeypatch, failing):  # type: ignore[no-untyped-def]
    """An error in either half of the ``_msearch`` (a shard still starting, say), or a shard that failed it,
    sends the get and the search again, one after the other, where the get waits for starting shards and each
    raises its own error."""
    await store.add_conversation(conversation("c", ALICE, at(0)))
    assert await store.add_interaction(interaction("i0", "c", ALICE, at(1)))
    original = store.client.msearch

    async def half_failing(*args: Any, **kwargs: Any) -> dict[str, Any]:
        answer = await original(*args, **kwargs)
        answer["responses"][0] = failing
        return answer

    monkeypatch.setattr(store.client, "msearch", half_failing)
    calls = counted_requests(store)
    assert [found.interaction_id for found in await store.list_interactions(ALICE, "c", 0, 10, True)] == ["i0"]  # type: ignore[union-attr]
    assert [call.split("?")[0].rsplit("/", 1)[-1] for call in calls] == ["_msearch", "c", "_search"], calls
    assert await store.list_interactions(BOB, "c", 0, 10, True) is None


async def test_a_memorys_version_moves_with_every_write_to_its_pages(store, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    """``messages_version`` (what kept pages are served under) is the memory document's, read from the node:
    another process's add, message update and delete move it or end it; reads, a no-op update and another
    memory's writes leave it.  The ``_version`` a memory shows still counts what ml-commons' does."""
    other = OpenSearchMemoryStore(OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix))
    await other.open()
    try:
        await store.add_conversation(conversation("c", ALICE, at(0)))
        await store.add_conversation(conversation("d", ALICE, at(0)))
        created = await store.messages_version("c")
        assert created is not None and await store.messages_version("c") == created
        assert await other.add_interaction(interaction("i0", "c", ALICE, at(1)))
        added = await store.messages_version("c")
        assert added not in (None, created)
        assert await store.list_interactions(ALICE, "c", 0, 10, True) is not None
        assert await other.add_interaction(interaction("j0", "d", ALICE, at(2)))
        noop = await other.update_interaction(ALICE, "i0", {"input": "in i0"})
        assert noop is not None and noop.result == "noop"
        assert await store.messages_version("c") == added
        assert (await other.update_interaction(ALICE, "i0", {"response": "changed"})).result == "updated"  # type: ignore[union-attr]
        edited = await store.messages_version("c")
        assert edited not in (None, created, added)
        # Created, one add's bump, the rename: 3, as on ml-commons; the message update is not counted.
        renamed = await other.update_conversation(ALICE, "c", {"name": "renamed"})
        assert renamed is not None and renamed.document.version == 3
        assert (await store.get_conversation(ALICE, "c")).version == 3  # type: ignore[union-attr]
        assert await store.messages_version("unknown") is None
        assert await other.delete_conversation(ALICE, "c") == ["i0"]
        assert await store.messages_version("c") is None
    finally:
        await other.close()


async def test_a_memory_index_made_before_message_edits_gains_the_field_at_open(opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    """Indices of this schema made by an older server lack ``message_edits`` (and are strict): open adds it."""
    node = opensearch_nodes[0]
    internal = META_MAPPINGS["properties"]["memory_plugin"]["properties"]
    older = {k: v for k, v in internal.items() if k != "message_edits"}
    mappings = {**META_MAPPINGS, "properties": {**META_MAPPINGS["properties"], "memory_plugin": {"properties": older}}}
    status, made = node.request(
        "PUT",
        f"/{index_prefix}-memory-meta-v{SCHEMA_VERSION}",
        {"mappings": mappings, "aliases": {f"{index_prefix}-memory-meta": {}}},
    )
    assert status == 200, made
    opened = OpenSearchMemoryStore(OpenSearchRegion(hosts=(node.url,), index_prefix=index_prefix))
    await opened.open()
    try:
        await opened.add_conversation(conversation("c", ALICE, at(0)))
        assert await opened.add_interaction(interaction("i0", "c", ALICE, at(1)))
        before = await opened.messages_version("c")
        assert (await opened.update_interaction(ALICE, "i0", {"input": "new"})).result == "updated"  # type: ignore[union-attr]
        assert await opened.messages_version("c") != before
    finally:
        await opened.close()


async def test_versions_asked_at_once_are_read_together(store, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    """Readers of a few memories asking at once share one ``_mget``; those asking while one is in flight share
    the next (never one sent before they asked: a version read after another process's add is acknowledged
    sees it)."""
    other = OpenSearchMemoryStore(OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix))
    await other.open()
    try:
        for cid in ("c", "d"):
            await store.add_conversation(conversation(cid, ALICE, at(0)))
        calls = counted_requests(store)
        before = await asyncio.gather(*(store.messages_version(("c", "d", "unknown")[n % 3]) for n in range(30)))
        assert [call.split("?")[0].rsplit("/", 1)[-1] for call in calls] == ["_mget"], calls
        assert before[0::3] == [before[0]] * 10 and before[1::3] == [before[1]] * 10 and before[2::3] == [None] * 10
        assert None not in (before[0], before[1]) and before[0] != before[1]

        async def add_then_ask(n: int) -> bool:
            assert await other.add_interaction(interaction(f"i{n}", "c", ALICE, at(n + 1)))
            return await store.messages_version("c") != before[0]

        readers = [store.messages_version("c") for _ in range(20)]  # in flight while the adds are acknowledged
        seen = await asyncio.gather(*(add_then_ask(n) for n in range(5)), *readers)
        assert seen[:5] == [True] * 5 and None not in seen[5:]
    finally:
        await other.close()


async def test_a_failed_version_read_serves_every_reader_a_fresh_page(store, monkeypatch):  # type: ignore[no-untyped-def]
    """The shared ``_mget`` is only a shortcut: if it fails, no reader gets its error or a kept page."""
    await store.add_conversation(conversation("c", ALICE, at(0)))
    assert await store.add_interaction(interaction("i0", "c", ALICE, at(1)))

    async def failing(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise TransportError(400, "illegal_argument_exception", "one reader's id was refused")

    monkeypatch.setattr(store.client, "mget", failing)
    assert await asyncio.gather(*(store.messages_version(cid) for cid in ("c", "c", "unknown"))) == [None] * 3
    page = await store.list_interactions(ALICE, "c", 0, 10, True)
    assert [found.interaction_id for found in page] == ["i0"]  # type: ignore[union-attr]
