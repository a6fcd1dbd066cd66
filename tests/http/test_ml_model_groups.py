"""Model groups and the model update (issue 46 item 6), as ml-commons 2.19 serves them with access control.

The first tests replay the OpenSearch API specification's stories step by step (adapted from
opensearch-project/opensearch-api-specification, Apache-2.0: ``tests/plugins/ml/ml/model_groups.yaml``,
``model_groups/search.yaml``, ``model_groups/update.yaml`` and the update chapter of ``models.yaml``),
checking each asserted status and payload, and the shape the specification's schemas give each answer.
The rest check sharing within an organisation by access mode and backend role, as containers share.
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema_rs import validate

from memory_plugin.auth import KeyStore, Principal
from memory_plugin.ml.stores.base import MLStore
from memory_plugin.ml.stores.sqlite import SqliteMLStore
from tests.conftest import Caller
from tests.http import test_ml
from tests.http.test_ml import call, remote_model
from tests.support.scripted_openai import chat_connector

pytestmark = pytest.mark.backends("embedded", "opensearch")

#: The ML suite's fixtures: the app trusting loopback, and the scripted OpenAI-compatible server.
ml, openai = test_ml.ml, test_ml.openai

GROUPS = "/model_groups"
ALL = {"query": {"match_all": {}}}
WRITE_KEYS = {"_index", "_id", "_version", "result", "_shards", "_seq_no", "_primary_term"}

# The specification's response schemas of these operations (spec/schemas/ml._common.yaml and _common.yaml:
# ModelGroupRegistration, ModelGroup with Owner, UpdateModelGroupResponse, WriteResponseBase), inlined.
STRINGS = {"type": "array", "items": {"type": "string"}}
REGISTRATION = {
    "type": "object",
    "properties": {"model_group_id": {"type": "string"}, "status": {"type": "string"}},
    "required": ["model_group_id", "status"],
}
OWNER = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "backend_roles": STRINGS,
        "roles": STRINGS,
        "custom_attribute_names": STRINGS,
        "user_requested_tenant": {"type": ["null", "string"]},
    },
    "required": ["name"],
}
MODEL_GROUP = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "latest_version": {"type": "integer"},
        "description": {"type": "string"},
        "owner": OWNER,
        "access": {"enum": ["private", "public", "restricted"]},
        "created_time": {"type": "integer"},
        "last_updated_time": {"type": "integer"},
    },
    "required": ["access", "description", "latest_version", "name"],
}
UPDATED = {"type": "object", "properties": {"status": {"type": "string"}}}
WRITE_RESPONSE = {
    "type": "object",
    "properties": {
        "_id": {"type": "string"},
        "_index": {"type": "string"},
        "_primary_term": {"type": "integer"},
        "result": {"enum": ["created", "deleted", "noop", "not_found", "updated"]},
        "_seq_no": {"type": "integer"},
        "_shards": {
            "type": "object",
            "properties": {
                "failed": {"type": "integer"},
                "successful": {"type": "integer"},
                "total": {"type": "integer"},
            },
            "required": ["failed", "successful", "total"],
        },
        "_version": {"type": "integer"},
        "forced_refresh": {"type": "boolean"},
    },
    "required": ["_id", "_index", "_primary_term", "_seq_no", "_shards", "_version", "result"],
}


def role_caller(keys: KeyStore, organization_id: str, user_id: str | None, *roles: str) -> Caller:
    entry, token = keys.create(organization_id, user_id, roles)
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


@pytest.fixture
def sam(keys: KeyStore) -> Caller:
    """org-1, alice's colleague holding the role ``support`` too."""
    return role_caller(keys, "org-1", "sam", "support")


async def group(api: Any, caller: Caller, **body: Any) -> str:
    created = await call(api, caller, "POST", f"{GROUPS}/_register", {"name": "g", **body})
    assert created["status"] == "CREATED"
    return str(created["model_group_id"])


async def search_ids(api: Any, caller: Caller, body: Any = ALL) -> list[str]:
    found = await call(api, caller, "POST", f"{GROUPS}/_search", body)
    return [hit["_id"] for hit in found["hits"]["hits"]]


async def refused(api: Any, caller: Caller, method: str, path: str, body: Any, status: int) -> str:
    return str((await call(api, caller, method, path, body, status=status))["error"]["reason"])


# -- the specification's stories -------------------------------------------------------------


async def test_story_model_groups_create_get_delete(ml, alice):
    created = await call(
        ml, alice, "POST", f"{GROUPS}/_register", {"name": "NLP_Group", "description": "Model group for NLP models."}
    )
    validate(REGISTRATION, created)
    group_id = created["model_group_id"]
    shown = await call(ml, alice, "GET", f"{GROUPS}/{group_id}")
    validate(MODEL_GROUP, shown)
    assert shown["name"] == "NLP_Group" and shown["description"] == "Model group for NLP models."
    assert shown["latest_version"] == 0 and shown["access"] == "private" and shown["owner"]["name"] == "alice"
    assert isinstance(shown["created_time"], int) and isinstance(shown["last_updated_time"], int)
    deleted = await call(ml, alice, "DELETE", f"{GROUPS}/{group_id}")
    validate(WRITE_RESPONSE, deleted)
    assert deleted["result"] == "deleted" and deleted["_id"] == group_id and WRITE_KEYS <= set(deleted)
    assert deleted["forced_refresh"] is True and deleted["_version"] == 2
    # the epilogue deletes again: 200 or 404
    again = await call(ml, alice, "DELETE", f"{GROUPS}/{group_id}", status=404)
    assert again["error"]["reason"] == "Fail to find model group"


async def test_story_model_groups_search(ml, alice):
    group_id = await group(ml, alice, name="NLP_Group", description="Model group for NLP models.")
    response = await ml.request(
        "GET", f"/_plugins/_ml{GROUPS}/_search", json={"query": {"match_all": {}}, "size": 1000}, headers=alice.headers
    )
    found = await response.json()
    assert response.status == 200, found
    assert found["hits"]["hits"][0]["_score"] == 1 and found["hits"]["total"]["value"] == 1
    hit = found["hits"]["hits"][0]
    assert hit["_index"] == ".plugins-ml-model-group" and hit["_id"] == group_id
    assert hit["_source"]["name"] == "NLP_Group"
    by_id = {"query": {"bool": {"must": [{"terms": {"_id": [group_id]}}]}}}
    found = await call(ml, alice, "POST", f"{GROUPS}/_search", by_id)
    assert [(h["_id"], h["_score"]) for h in found["hits"]["hits"]] == [(group_id, 1)]
    await call(ml, alice, "DELETE", f"{GROUPS}/{group_id}")


async def test_story_model_groups_update(ml, alice):
    group_id = await group(ml, alice, name="NLP_Group", description="Model group for NLP models.")
    await call(ml, alice, "GET", f"{GROUPS}/{group_id}")
    updated = await call(ml, alice, "PUT", f"{GROUPS}/{group_id}", {"description": "This is the updated description."})
    validate(UPDATED, updated)
    assert updated == {"status": "Updated"}
    shown = await call(ml, alice, "GET", f"{GROUPS}/{group_id}")
    validate(MODEL_GROUP, shown)
    assert shown["description"] == "This is the updated description." and shown["name"] == "NLP_Group"
    # the same update again changes nothing, and writes nothing (the node's update detects the no-op)
    assert await call(ml, alice, "PUT", f"{GROUPS}/{group_id}", {"description": "This is the updated description."})
    assert (await call(ml, alice, "DELETE", f"{GROUPS}/{group_id}"))["_version"] == 3


async def test_story_models_update(ml, alice, openai):
    _, model_id = await remote_model(ml, alice, chat_connector(openai.url, "k"))
    await call(ml, alice, "GET", f"/models/{model_id}")
    updated = await call(ml, alice, "PUT", f"/models/{model_id}", {"name": "updated"})
    validate(WRITE_RESPONSE, updated)
    assert updated["result"] == "updated" and updated["_id"] == model_id and WRITE_KEYS <= set(updated)
    assert updated["_index"] == ".plugins-ml-model"
    shown = await call(ml, alice, "GET", f"/models/{model_id}")
    assert shown["name"] == "updated" and shown["model_id"] == model_id  # ml-commons' update writes it in
    await call(ml, alice, "DELETE", f"/models/{model_id}")


async def test_story_models_with_the_built_in_model(ml, alice):
    """``models.yaml`` whole, its prologue registering the built-in model instead of a pretrained one this server
    cannot load: the register task completes, and search, get, update and delete answer as the story asserts."""
    body = {"name": "built-in", "version": "1.0.1", "model_format": "TORCH_SCRIPT"}
    task_id = (await call(ml, alice, "POST", "/models/_register", body))["task_id"]
    task = await call(ml, alice, "GET", f"/tasks/{task_id}")
    assert task["state"] == "COMPLETED"
    model_id = task["model_id"]
    response = await ml.request(
        "GET", "/_plugins/_ml/models/_search", json={"query": {"match_all": {}}, "size": 1000}, headers=alice.headers
    )
    found = await response.json()
    assert response.status == 200, found
    assert [(hit["_id"], hit["_score"]) for hit in found["hits"]["hits"]] == [(model_id, 1)]
    assert (await call(ml, alice, "GET", f"/models/{model_id}"))["name"] == "built-in"
    updated = await call(ml, alice, "PUT", f"/models/{model_id}", {"name": "updated"})
    validate(WRITE_RESPONSE, updated)
    assert updated["result"] == "updated" and updated["_id"] == model_id
    assert (await call(ml, alice, "GET", f"/models/{model_id}"))["name"] == "updated"
    deleted = await call(ml, alice, "DELETE", f"/models/{model_id}")
    validate(WRITE_RESPONSE, deleted)
    assert deleted["result"] == "deleted" and deleted["_id"] == model_id


# -- registering and its rules -----------------------------------------------------------------


async def test_names_are_unique_in_the_organisation_only(ml, alice, bob, carol):
    first = await group(ml, alice, name="shared-name")
    reason = await refused(ml, bob, "POST", f"{GROUPS}/_register", {"name": "shared-name"}, 400)
    assert reason == f"The name you provided is already being used by a model group with ID: {first}."
    await group(ml, carol, name="shared-name")  # another organisation
    second = await group(ml, alice, name="other")
    reason = await refused(ml, alice, "PUT", f"{GROUPS}/{second}", {"name": "shared-name"}, 400)
    assert reason == (
        f"The name you provided is already being used by another model with ID: {first}. Please provide a different name"
    )
    assert await refused(ml, alice, "POST", f"{GROUPS}/_register", {"description": "x"}, 400) == (
        "model group name must not be null"
    )
    empty = await call(ml, alice, "POST", f"{GROUPS}/_register", None, status=400)
    assert empty["error"]["type"] == "parse_exception"
    assert empty["error"]["reason"] == "Model group request has empty body"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"backend_roles": ["support"], "add_all_backend_roles": True}, "You cannot specify backend roles and add all"),
        ({"access_mode": "public", "backend_roles": ["support"]}, "You can specify backend roles only for a model"),
        ({"access_mode": "private", "add_all_backend_roles": True}, "You can specify backend roles only for a model"),
        ({"access_mode": "restricted"}, "You must specify one or more backend roles or add all backend roles"),
        ({"backend_roles": ["admins"]}, "You don't have the backend roles specified."),
        ({"access_mode": "secret"}, "Wrong access value"),
        ({"backend_roles": "support"}, "expecting token of type [START_ARRAY] but found [VALUE_STRING]"),
    ],
)
async def test_register_refuses_what_ml_commons_refuses(ml, dave, body, reason):
    assert reason in await refused(ml, dave, "POST", f"{GROUPS}/_register", {"name": "g", **body}, 400)


async def test_restricted_needs_roles_and_the_organisation_key_cannot_add_all(ml, alice, admin):
    reason = await refused(ml, alice, "POST", f"{GROUPS}/_register", {"name": "g", "access_mode": "restricted"}, 400)
    assert reason == "You must have at least one backend role to register a restricted model group."
    reason = await refused(ml, admin, "POST", f"{GROUPS}/_register", {"name": "g", "add_all_backend_roles": True}, 400)
    assert reason == "Admin users cannot add all backend roles to a model group."
    # the organisation key may name roles it does not hold
    admins = await group(ml, admin, name="by-admin", backend_roles=["anything"])
    assert (await call(ml, admin, "GET", f"{GROUPS}/{admins}"))["access"] == "restricted"


# -- sharing -------------------------------------------------------------------------------------


async def test_access_modes_share_within_the_organisation_only(ml, alice, bob, dave, erin, mallory, admin, sam):
    private = await group(ml, sam, name="private")
    public = await group(ml, sam, name="public", access_mode="public")
    restricted = await group(ml, sam, name="restricted", add_all_backend_roles=True)
    shown = await call(ml, sam, "GET", f"{GROUPS}/{restricted}")
    assert shown["access"] == "restricted" and shown["backend_roles"] == ["support"]
    assert sorted(await search_ids(ml, sam)) == sorted([private, public, restricted])
    assert sorted(await search_ids(ml, admin)) == sorted([private, public, restricted])
    assert sorted(await search_ids(ml, dave)) == sorted([public, restricted])
    assert await search_ids(ml, erin) == [public]
    assert await search_ids(ml, mallory) == []
    for caller, absent in ((bob, private), (erin, restricted), (mallory, public), (mallory, restricted)):
        reason = await refused(ml, caller, "GET", f"{GROUPS}/{absent}", None, 404)
        assert reason == f"Failed to find model group with the provided model group id: {absent}"
        await refused(ml, caller, "PUT", f"{GROUPS}/{absent}", {"description": "mine now"}, 404)
        await refused(ml, caller, "DELETE", f"{GROUPS}/{absent}", None, 404)
    assert (await call(ml, dave, "GET", f"{GROUPS}/{restricted}"))["name"] == "restricted"
    assert (await call(ml, admin, "GET", f"{GROUPS}/{private}"))["name"] == "private"
    assert (await call(ml, sam, "GET", f"{GROUPS}/{private}"))["name"] == "private"


async def test_role_holders_update_but_only_the_owner_changes_access(ml, sam, dave, admin):
    restricted = await group(ml, sam, name="restricted", backend_roles=["support"])
    assert await call(ml, dave, "PUT", f"{GROUPS}/{restricted}", {"description": "by dave"}) == {"status": "Updated"}
    reason = await refused(ml, dave, "PUT", f"{GROUPS}/{restricted}", {"access_mode": "public"}, 400)
    assert reason == "Only owner or admin can update access control data."
    reason = await refused(ml, sam, "PUT", f"{GROUPS}/{restricted}", {"add_all_backend_roles": False}, 400)
    assert reason == "You have to specify backend roles when add all backend roles is set to false."
    await call(ml, sam, "PUT", f"{GROUPS}/{restricted}", {"access_mode": "private"})
    shown = await call(ml, sam, "GET", f"{GROUPS}/{restricted}")
    assert shown["access"] == "private" and "backend_roles" not in shown and shown["description"] == "by dave"
    await refused(ml, dave, "GET", f"{GROUPS}/{restricted}", None, 404)
    await call(ml, admin, "PUT", f"{GROUPS}/{restricted}", {"backend_roles": ["ops"]})
    shown = await call(ml, dave, "GET", f"{GROUPS}/{restricted}")
    assert shown["access"] == "restricted" and shown["backend_roles"] == ["ops"]


async def test_registering_a_model_into_a_group_checks_access_and_counts_versions(ml, alice, bob, sam, dave, openai):
    connector = chat_connector(openai.url, "k")
    shared = await group(ml, sam, name="shared", backend_roles=["support"])
    private = await group(ml, sam, name="sams")

    async def register(caller: Caller, group_id: str, status: int = 200) -> Any:
        connector_id = (await call(ml, caller, "POST", "/connectors/_create", connector))["connector_id"]
        body = {"name": "m", "function_name": "remote", "connector_id": connector_id, "model_group_id": group_id}
        return await call(ml, caller, "POST", "/models/_register", body, status=status)

    first = await register(sam, shared)
    second = await register(dave, shared)
    versions = [(await call(ml, c, "GET", f"/models/{r['model_id']}")) for c, r in ((sam, first), (dave, second))]
    assert [(v["model_group_id"], v["model_version"]) for v in versions] == [(shared, "1"), (shared, "2")]
    assert (await call(ml, sam, "GET", f"{GROUPS}/{shared}"))["latest_version"] == 2
    # each new version is a write of the group: found by its _version in a search
    [hit] = (
        await call(ml, sam, "POST", f"{GROUPS}/_search", {"query": {"ids": {"values": [shared]}}, "version": True})
    )["hits"]["hits"]
    assert hit["_version"] == 3
    owned = {"query": {"term": {"owner.name.keyword": "sam"}}}  # owner is nested: no plain query reaches it
    assert await search_ids(ml, sam, owned) == []
    assert (await register(bob, shared, 404))["error"]["reason"] == "Model group not found"
    assert (await register(dave, private, 404))["error"]["reason"] == "Model group not found"

    # a group holding models, whoever registered them, is not deleted
    reason = await refused(ml, sam, "DELETE", f"{GROUPS}/{shared}", None, 409)
    assert reason == "Cannot delete the model group when it has associated model versions"
    await call(ml, dave, "DELETE", f"/models/{second['model_id']}")
    await refused(ml, sam, "DELETE", f"{GROUPS}/{shared}", None, 409)
    await call(ml, sam, "DELETE", f"/models/{first['model_id']}")
    assert (await call(ml, sam, "DELETE", f"{GROUPS}/{shared}"))["result"] == "deleted"


async def test_a_model_registered_without_a_group_joins_its_owners_group_of_its_name(ml, alice, bob, openai):
    _, first = await remote_model(ml, alice, chat_connector(openai.url, "k"))
    _, second = await remote_model(ml, alice, chat_connector(openai.url, "k"))
    _, bobs = await remote_model(ml, bob, chat_connector(openai.url, "k"))
    groups = [
        (await call(ml, c, "GET", f"/models/{m}"))["model_group_id"] for c, m in ((alice, first), (alice, second))
    ]
    assert groups[0] == groups[1]
    assert (await call(ml, bob, "GET", f"/models/{bobs}"))["model_group_id"] != groups[0]
    shown = await call(ml, alice, "GET", f"{GROUPS}/{groups[0]}")
    assert shown["name"] == "m" and shown["latest_version"] == 2 and shown["access"] == "private"


# -- updating a model ------------------------------------------------------------------------------


async def test_updating_a_model_moves_it_between_groups_it_may_use(ml, alice, sam, openai):
    _, model_id = await remote_model(ml, sam, chat_connector(openai.url, "k"))
    target = await group(ml, alice, name="public", access_mode="public")
    hidden = await group(ml, alice, name="hidden")
    body = {"model_group_id": target, "description": "moved", "unknown_field": {"skipped": True}}
    await call(ml, sam, "PUT", f"/models/{model_id}", body)
    shown = await call(ml, sam, "GET", f"/models/{model_id}")
    assert (shown["model_group_id"], shown["model_version"], shown["description"]) == (target, "1", "moved")
    reason = await refused(ml, sam, "PUT", f"/models/{model_id}", {"model_group_id": hidden}, 404)
    assert reason == (
        "Failed to find the model group with the provided model group id in the update model input, "
        f"MODEL_GROUP_ID: {hidden}"
    )


async def test_model_update_refusals(ml, alice, bob, openai):
    connector_id, model_id = await remote_model(ml, alice, chat_connector(openai.url, "k"))
    path = f"/models/{model_id}"
    reason = await refused(ml, bob, "PUT", path, {"name": "x"}, 404)
    assert reason == f"Failed to find model to update with the provided model id: {model_id}"
    both = {"connector_id": connector_id, "connector": {"name": "c"}}
    assert "both stand-alone connector and internal connector" in await refused(ml, alice, "PUT", path, both, 400)
    assert "[rate_limiter] cannot be updated" in await refused(
        ml, alice, "PUT", path, {"rate_limiter": {"limit": "1", "unit": "MINUTES"}}, 400
    )
    assert await refused(ml, alice, "PUT", path, {"connector_id": "nope"}, 404) == "Failed to find connector:nope"
    other = (await call(ml, alice, "POST", "/connectors/_create", chat_connector(openai.url, "k2")))["connector_id"]
    await call(ml, alice, "PUT", path, {"connector_id": other})
    assert (await call(ml, alice, "GET", path))["connector_id"] == other
    assert "empty body" in await refused(ml, alice, "PUT", path, None, 400)
    # nothing of the refused updates was kept
    assert (await call(ml, alice, "GET", path))["name"] == "m"


# -- the store's organisation-wide reads ------------------------------------------------------------


async def organisation_reads(store: MLStore) -> None:
    """``find`` and ``organization`` name each document's owner and never reach another organisation."""
    alice, bob, carol = Principal("org", "alice"), Principal("org", "bob"), Principal("other", "carol")
    await store.create("model_group", alice, "g1", {"n": 1})
    await store.create("model_group", bob, "g2", {"n": 2})
    await store.create("model_group", carol, "g3", {"n": 3})
    await store.create("model", alice, "m1", {"n": 4})
    listed = await store.organization("model_group", "org")
    assert [(o.owner, o.stored.id) for o in listed] == [(alice, "g1"), (bob, "g2")]
    found = await store.find("model_group", "org", "g2")
    assert found is not None and found.owner == bob and found.stored.source == {"n": 2}
    assert await store.find("model_group", "org", "g3") is None
    assert await store.find("model", "org", "g1") is None
    assert await store.replace("model_group", found.owner, found.stored, {"n": 5})
    again = await store.find("model_group", "org", "g2")
    assert again is not None and again.stored.source == {"n": 5}
    assert [o.stored.id for o in await store.organization("model_group", "org")] == ["g1", "g2"]


async def test_organisation_reads_on_sqlite(tmp_path):
    store = SqliteMLStore(tmp_path / "ml.sqlite3")
    await store.open()
    try:
        await organisation_reads(store)
    finally:
        await store.close()


@pytest.mark.backends("opensearch")
async def test_the_suite_really_runs_on_opensearch(ml):  # type: ignore[no-untyped-def]
    from memory_plugin.ml.routes import ML as ML_SERVICE
    from memory_plugin.ml.stores.opensearch import OpenSearchMLStore

    assert isinstance(ml.app[ML_SERVICE].store, OpenSearchMLStore)
