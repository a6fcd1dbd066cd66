"""Containers shared through ``backend_roles`` (ml-commons' ``checkMemoryContainerAccess``, issue 27 item 3).

A container is usable by its owner, by the keys of its organisation holding one of its roles, and by the
organisation's own key; memories inside stay each writer's, as ml-commons filters them by ``owner_id``.
Only the owner or the organisation's key deletes it.  Another organisation never sees it, whatever roles
its keys hold.  Runs on both backends (``backend``: embedded, and OpenSearch in the full suite).
"""

from __future__ import annotations

import pytest

from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.auth import KeyStore, Principal
from tests.conftest import Caller
from tests.http.test_agentic import SEMANTIC_CONFIG, call, container, conversation, error, seed_long_term, settle

#: SEMANTIC_CONFIG's embedding dimension is the real model's.
pytestmark = [pytest.mark.model, pytest.mark.backends("embedded", "opensearch")]

ALL = {"query": {"match_all": {}}}


def role_caller(keys: KeyStore, organization_id: str, user_id: str | None, *roles: str) -> Caller:
    entry, token = keys.create(organization_id, user_id, roles)
    assert entry.backend_roles == roles
    return Caller(entry.key_id, token, organization_id, user_id)


@pytest.fixture
def dave(keys: KeyStore) -> Caller:
    """org-1, holding the role alice shares with."""
    return role_caller(keys, "org-1", "dave", "support", "ops")


@pytest.fixture
def erin(keys: KeyStore) -> Caller:
    """org-1, holding another role."""
    return role_caller(keys, "org-1", "erin", "sales")


@pytest.fixture
def mallory(keys: KeyStore) -> Caller:
    """org-2, holding the very role alice shares with: still another organisation."""
    return role_caller(keys, "org-2", "mallory", "support")


async def ids(api, caller: Caller, path: str = "/_search", body: dict | None = None) -> list[str]:
    found = await call(api, caller, "POST", path, body or ALL)
    return [hit["_id"] for hit in found["hits"]["hits"]]


async def add(api, caller: Caller, cid: str, text: str) -> str:
    added = await call(api, caller, "POST", f"/{cid}/memories", {"messages": conversation(text)})
    return str(added["working_memory_id"])


async def test_a_role_holder_uses_the_container_and_sees_only_its_own_memories(api, alice, dave, erin, mallory):
    shared = await container(api, alice, backend_roles=["support"])
    private = await container(api, alice)
    alices = await add(api, alice, shared, "alice's note")
    daves = await add(api, dave, shared, "dave's note")
    # the role holder reads and updates the container; it stays alice's
    assert (await call(api, dave, "GET", f"/{shared}"))["owner"]["name"] == "alice"
    await call(api, dave, "PUT", f"/{shared}", {"description": "edited by dave"})
    view = await call(api, alice, "GET", f"/{shared}")
    assert view["description"] == "edited by dave" and view["owner"]["name"] == "alice"
    assert view["backend_roles"] == ["support"]
    # memories stay their writers' (ml-commons' owner_id filter)
    assert await ids(api, dave, f"/{shared}/memories/working/_search") == [daves]
    assert await ids(api, alice, f"/{shared}/memories/working/_search") == [alices]
    await error(api, dave, "GET", f"/{shared}/memories/working/{alices}", None, 404, "Memory not found")
    assert (await call(api, dave, "GET", f"/{shared}/memories/working/{daves}"))["owner_id"] == "dave"
    # the private container and everything of it stays alice's
    await error(api, dave, "GET", f"/{private}", None, 404, "Failed to find memory container")
    await error(api, dave, "POST", f"/{private}/memories", {"messages": conversation("x")}, 404, "Memory container")
    # a key of another role, and another organisation's key of the same role, find nothing
    for stranger in (erin, mallory):
        await error(api, stranger, "GET", f"/{shared}", None, 404, "Failed to find memory container")
        await error(api, stranger, "PUT", f"/{shared}", {"name": "x"}, 404, "Memory container not found")
        await error(api, stranger, "POST", f"/{shared}/memories", {"messages": conversation("x")}, 404, "Memory")
        await error(api, stranger, "POST", f"/{shared}/memories/working/_search", ALL, 404, "Memory container")
        await error(api, stranger, "GET", f"/{shared}/memories/working/{daves}", None, 404, "Memory container")
        assert await ids(api, stranger) == []
    # the container search lists exactly what each may use
    assert sorted(await ids(api, alice)) == sorted([shared, private])
    assert await ids(api, dave) == [shared]


async def test_container_search_counts_and_pages_only_what_the_caller_may_use(api, alice, bob, dave, mallory):
    shared = [await container(api, alice, backend_roles=["ops", "support"]) for _ in range(3)]
    for _ in range(4):
        await container(api, alice)  # private
        await container(api, bob, backend_roles=["sales"])  # shared with a role dave lacks
        await container(api, mallory, backend_roles=["support"])  # dave's role, another organisation
    own = await container(api, dave)
    page = {"query": {"match_all": {}}, "size": 2, "sort": [{"created_time": "asc"}]}
    first = await call(api, dave, "POST", "/_search", page)
    assert first["hits"]["total"]["value"] == 4
    second = await call(api, dave, "POST", "/_search", {**page, "from": 2})
    seen = [hit["_id"] for hit in first["hits"]["hits"] + second["hits"]["hits"]]
    assert sorted(seen) == sorted([*shared, own])
    # a query on the roles themselves finds nothing beyond that
    by_role = {"query": {"term": {"backend_roles": "sales"}}}
    assert await ids(api, dave, body=by_role) == []


async def test_the_organisation_key_uses_every_container_of_its_organisation(api, alice, bob, admin, mallory):
    alices, bobs = await container(api, alice), await container(api, bob, backend_roles=["sales"])
    theirs = await container(api, mallory)
    note = await add(api, alice, alices, "alice's note")
    assert sorted(await ids(api, admin)) == sorted([alices, bobs])
    assert (await call(api, admin, "GET", f"/{alices}"))["owner"]["name"] == "alice"
    await error(api, admin, "GET", f"/{theirs}", None, 404, "Failed to find memory container")
    # inside, memories stay their writers': the admin's own writes are its own
    mine = await add(api, admin, alices, "the admin's note")
    assert await ids(api, admin, f"/{alices}/memories/working/_search") == [mine]
    assert await ids(api, alice, f"/{alices}/memories/working/_search") == [note]
    # it deletes any container of its organisation, memories and all
    await call(api, admin, "DELETE", f"/{alices}")
    await error(api, alice, "GET", f"/{alices}", None, 404, "Failed to find memory container")
    store = api.app[AGENTIC].store
    assert await store.docs(Principal("org-1", "alice"), alices, "working") == []
    assert await store.docs(Principal("org-1"), alices, "working") == []


async def test_only_the_owner_deletes_and_its_delete_takes_every_writers_memories(api, alice, dave):
    shared = await container(api, alice, backend_roles=["support"])
    await add(api, dave, shared, "dave's note")
    await error(api, dave, "DELETE", f"/{shared}", None, 403, "Only container owner can delete container")
    assert (await call(api, alice, "GET", f"/{shared}"))["name"] == "agent"
    await call(api, alice, "DELETE", f"/{shared}")
    assert await api.app[AGENTIC].store.docs(Principal("org-1", "dave"), shared, "working") == []
    await error(api, dave, "GET", f"/{shared}", None, 404, "Failed to find memory container")


async def test_unsharing_closes_the_container_at_once(api, alice, dave):
    shared = await container(api, alice, backend_roles=["support"])
    await call(api, alice, "PUT", f"/{shared}", {"backend_roles": []})
    await error(api, dave, "GET", f"/{shared}", None, 404, "Failed to find memory container")
    assert await ids(api, dave) == []
    await call(api, alice, "PUT", f"/{shared}", {"backend_roles": ["ops"]})  # another of dave's roles
    await call(api, dave, "GET", f"/{shared}")


async def test_a_role_holders_inferred_memories_are_its_own(api, alice, dave, llm):
    shared = await container(api, alice, SEMANTIC_CONFIG, backend_roles=["support"])
    await seed_long_term(api, dave, shared, llm, ["Dave's desk is by the window"], user="dave")
    await settle(api)
    found = await call(api, dave, "POST", f"/{shared}/memories/long-term/_search", ALL)
    [hit] = found["hits"]["hits"]
    assert hit["_source"]["memory"] == "Dave's desk is by the window" and hit["_source"]["owner_id"] == "dave"
    semantic = await call(api, dave, "POST", f"/{shared}/memories/long-term/_semantic_search", {"query": "desk"})
    assert [hit["_id"] for hit in semantic["hits"]["hits"]] == [hit["_id"]]
    assert await ids(api, alice, f"/{shared}/memories/long-term/_search") == []


async def test_a_search_ranks_only_the_callers_memories_so_others_never_crowd_out_its_top_k(api, alice, dave, llm):
    """In a shared container the nearest memories may be another writer's: k results are still the caller's k best."""
    shared = await container(api, alice, SEMANTIC_CONFIG, backend_roles=["support"])
    desks = ["Alice's desk is by the door", "Alice's desk is made of oak", "Alice keeps two lamps on her desk"]
    await seed_long_term(api, alice, shared, llm, desks, user="alice")
    await seed_long_term(api, dave, shared, llm, ["Dave drinks green tea", "Dave's car is red"], user="dave")
    for kind in ("_semantic_search", "_hybrid_search"):
        found = await call(api, dave, "POST", f"/{shared}/memories/long-term/{kind}", {"query": "desk", "k": 2})
        memories = sorted(hit["_source"]["memory"] for hit in found["hits"]["hits"])
        assert memories == ["Dave drinks green tea", "Dave's car is red"], kind
        found = await call(api, alice, "POST", f"/{shared}/memories/long-term/{kind}", {"query": "desk", "k": 3})
        assert sorted(hit["_source"]["memory"] for hit in found["hits"]["hits"]) == sorted(desks), kind


async def test_a_containers_owner_carries_its_creators_backend_roles(api, alice, dave):
    """ml-commons keeps the creator's user object in the container: its ``backend_roles`` are the key's."""
    mine = await container(api, dave)
    view = await call(api, dave, "GET", f"/{mine}")
    assert view["owner"] == {
        "name": "dave",
        "backend_roles": ["support", "ops"],
        "roles": [],
        "custom_attribute_names": [],
        "user_requested_tenant": None,
    }
    assert "owner_backend_roles" not in view
    found = await call(api, dave, "POST", "/_search", {"query": {"term": {"owner.backend_roles": "ops"}}})
    assert [(hit["_id"], hit["_source"]["owner"]) for hit in found["hits"]["hits"]] == [(mine, view["owner"])]
    await call(api, dave, "PUT", f"/{mine}", {"description": "edited", "backend_roles": ["sales"]})
    assert (await call(api, dave, "GET", f"/{mine}"))["owner"]["backend_roles"] == ["support", "ops"]
    alices = await container(api, alice)  # a key without roles
    assert (await call(api, alice, "GET", f"/{alices}"))["owner"]["backend_roles"] == []


async def test_a_role_is_checked_by_ml_commons_rule_and_words(api, alice, keys):
    """``validateBackendRoles``: Unicode letters and digits and :+=,.@-_/; its refusal is a 400 parse_exception."""
    holder = role_caller(keys, "org-1", "zoe", "équipe-1")
    shared = await container(api, alice, backend_roles=["équipe-1"])
    assert (await call(api, holder, "GET", f"/{shared}"))["backend_roles"] == ["équipe-1"]
    payload = await call(api, alice, "PUT", f"/{shared}", {"backend_roles": ["bad role"]}, 400)
    reason = (
        "Backend role contains invalid characters. Only alphanumeric characters and :+=,.@-_/ are allowed: bad role"
    )
    assert payload["error"]["type"] == "parse_exception" and payload["error"]["reason"] == reason
    with pytest.raises(ValueError, match="^Backend role cannot be empty or blank$"):
        keys.create("org-1", "zoe", ["\t"])


@pytest.mark.backends("opensearch")
async def test_the_sharing_suite_really_runs_on_opensearch(api):  # type: ignore[no-untyped-def]
    from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore

    assert isinstance(api.app[AGENTIC].store, OpenSearchAgenticStore)
