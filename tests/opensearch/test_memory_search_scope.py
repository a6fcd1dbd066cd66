"""The memory ``_search`` on OpenSearch, attacked: nothing but the caller's own documents is ever read.

On the OpenSearch memory store the caller's query runs inside OpenSearch, over
indices every user of the deployment shares.  Alice, Bob (same organisation)
and Carol (another organisation) each have memories and messages with the same
words; every attack here is sent by Bob or Carol and must neither return nor
count nor reveal Alice's documents, nor show the store's own fields.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from memory_plugin.app import create_app
from memory_plugin.memory.routes_v211 import MEMORY
from memory_plugin.memory.stores.opensearch import OpenSearchMemoryStore
from memory_plugin.settings import OpenSearchRegion
from tests.support.fake_embedder import FakeEmbedder
from tests.support.polling import PATIENCE

pytestmark = pytest.mark.opensearch

M = "/_plugins/_ml/memory"
SECRET = "zanzibar"


@pytest.fixture
def index_prefix(opensearch_nodes):  # type: ignore[no-untyped-def]
    prefix = f"mp-scope-{uuid.uuid4().hex[:12]}"
    yield prefix
    opensearch_nodes[0].request("DELETE", f"/{prefix}-*", timeout=120)


@pytest.fixture
async def client(aiohttp_client, settings, opensearch_nodes, index_prefix, alice, bob, carol, admin):  # type: ignore[no-untyped-def]
    region = OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix, timeout=PATIENCE)
    app_settings = settings.replace(regions={"USA": region}, home_region="USA")
    return await aiohttp_client(create_app(app_settings, embedder=FakeEmbedder.with_default_tokenizer()))


async def call(client, caller, method: str, path: str, body: Any = None) -> tuple[int, Any]:  # type: ignore[no-untyped-def]
    response = await client.request(method, path, json=body, headers=caller.headers)
    return response.status, await response.json()


@pytest.fixture
async def world(client, alice, bob, carol):  # type: ignore[no-untyped-def]
    """Alice's secret memory and message; Bob and Carol each have one memory with the same words."""
    assert isinstance(client.app[MEMORY].store, OpenSearchMemoryStore)
    ids: dict[str, str] = {}
    for who, caller in (("alice", alice), ("bob", bob), ("carol", carol)):
        status, memory = await call(
            client,
            caller,
            "POST",
            M,
            {"name": f"{SECRET} plans of {who}", "application_type": f"app-{who}", "additional_info": {"k": who}},
        )
        assert status == 200, memory
        ids[who] = memory["memory_id"]
        status, message = await call(
            client,
            caller,
            "POST",
            f"{M}/{memory['memory_id']}/messages",
            {"input": f"{SECRET} input", "response": f"{SECRET} response of {who}", "origin": f"origin-{who}"},
        )
        assert status == 200, message
        ids[f"{who}-message"] = message["message_id"]
    return ids


def _dump(body: Any) -> str:
    return json.dumps(body)


def assert_nothing_of_alice(body: Any, world: dict[str, str], *, names_internal_field: bool = False) -> None:
    """Nothing of Alice's in ``body``, and nothing of the store's own fields (unless a refusal names them)."""
    text = _dump(body)
    for leak in (world["alice"], world["alice-message"], "of alice", "app-alice", "origin-alice", '"alice"'):
        assert leak not in text, f"{leak!r} leaked: {text}"
    assert "org-1" not in text, text
    assert names_internal_field or ("memory_plugin" not in text and "organization_id" not in text), text


async def test_a_query_sees_only_the_callers_memories_and_messages(client, world, alice, bob, carol):  # type: ignore[no-untyped-def]
    for caller, mine in ((bob, "bob"), (carol, "carol")):
        status, found = await call(client, caller, "POST", f"{M}/_search", {"query": {"match": {"name": SECRET}}})
        assert status == 200, found
        assert [hit["_id"] for hit in found["hits"]["hits"]] == [world[mine]]
        assert found["hits"]["total"]["value"] == 1
        assert found["hits"]["hits"][0]["_index"] == ".plugins-ml-memory-meta"
        for target in ("alice", mine):
            status, messages = await call(
                client, caller, "POST", f"{M}/{world[target]}/_search", {"query": {"match_all": {}}}
            )
            if target == "alice":
                assert status == 404, messages
            else:
                assert status == 200 and [h["_id"] for h in messages["hits"]["hits"]] == [world[f"{mine}-message"]]
                assert messages["hits"]["hits"][0]["_index"] == ".plugins-ml-memory-message"
        assert_nothing_of_alice(found, world)
    status, own = await call(client, alice, "POST", f"{M}/_search", {"query": {"match": {"name": SECRET}}})
    assert status == 200 and [hit["_id"] for hit in own["hits"]["hits"]] == [world["alice"]]
    assert own["hits"]["hits"][0]["_source"] == {
        "name": f"{SECRET} plans of alice",
        "create_time": own["hits"]["hits"][0]["_source"]["create_time"],
        "updated_time": own["hits"]["hits"][0]["_source"]["updated_time"],
        "user": "alice",
        "application_type": "app-alice",
        "additional_info": {"k": "alice"},
    }


#: Search bodies OpenSearch runs (or refuses itself), each trying to see more than the caller's own.
PROBES: list[dict[str, Any]] = [
    {"query": {"bool": {"should": [{"match_all": {}}, {"ids": {"values": ["ALICE"]}}]}}},
    {"query": {"term": {"user": "alice"}}},
    {"query": {"match_all": {}}, "post_filter": {"term": {"user": "alice"}}},
    {"query": {"match_all": {}}, "sort": [{"create_time": "asc"}], "search_after": [0]},
    {"query": {"match_all": {}}, "aggs": {"users": {"terms": {"field": "user"}}}},
    {"query": {"match_all": {}}, "aggs": {"apps": {"terms": {"field": "application_type", "size": 100}}}},
    {"query": {"match_all": {}}, "aggs": {"info": {"terms": {"field": "additional_info"}}}},
    {"query": {"match_all": {}}, "aggs": {"hits": {"top_hits": {"_source": ["*"], "size": 10}}}},
    {"query": {"match_all": {}}, "aggs": {"every": {"filters": {"filters": {"all": {"match_all": {}}}}}}},
    {"query": {"match_all": {}}, "aggs": {"n": {"value_count": {"field": "_id"}}}},
    {"query": {"match_all": {}}, "aggs": {"idx": {"terms": {"field": "_index"}}}},
    {"query": {"match_all": {}}, "_source": {"includes": ["*", "memory_plugin*", "organization*"]}},
    {"query": {"match_all": {}}, "fields": ["*"], "docvalue_fields": ["*"]},
    {"query": {"query_string": {"query": SECRET}}, "highlight": {"fields": {"*": {}}}},
    {"query": {"multi_match": {"query": "org-1 alice", "fields": ["*"]}}},
    {"query": {"match_all": {}}, "collapse": {"field": "user", "inner_hits": {"name": "u", "size": 5}}},
    {"query": {"match_all": {}}, "rescore": {"query": {"rescore_query": {"ids": {"values": ["ALICE"]}}}}},
    {"query": {"match_all": {}}, "min_score": 0, "track_total_hits": True, "size": 100},
]


async def test_no_search_body_reaches_another_users_memories(client, world, bob, carol):  # type: ignore[no-untyped-def]
    # One world for every probe: each index made and dropped costs seconds on a busy machine.
    for probe in PROBES:
        await _probe(client, world, bob, carol, json.loads(_dump(probe).replace("ALICE", world["alice"])))


async def _probe(client, world, bob, carol, body) -> None:  # type: ignore[no-untyped-def]
    for caller, mine in ((bob, "bob"), (carol, "carol")):
        status, found = await call(client, caller, "POST", f"{M}/_search", body)
        assert status in (200, 400), found
        if status == 200:
            assert {hit["_id"] for hit in found["hits"]["hits"]} <= {world[mine]}
            assert found["hits"]["total"]["value"] <= 1
        assert_nothing_of_alice(found, world)
        status, messages = await call(client, caller, "POST", f"{M}/{world[mine]}/_search", body)
        assert status in (200, 400), messages
        if status == 200:
            assert {hit["_id"] for hit in messages["hits"]["hits"]} <= {world[f"{mine}-message"]}
        assert_nothing_of_alice(messages, world)


#: Search bodies refused before anything is sent, and a word of each refusal.
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"query": {"terms": {"_id": {"index": "INDEX", "id": "ALICE", "path": "name"}}}}, "[terms] lookups"),
    (
        {"query": {"terms": {"name": {"index": ".plugins-ml-memory-meta", "id": "ALICE", "path": "name"}}}},
        "lookups",
    ),
    (
        {"query": {"more_like_this": {"fields": ["name"], "like": [{"_index": "INDEX", "_id": "ALICE"}]}}},
        "more_like",
    ),
    (
        {"query": {"more_like_this": {"fields": ["name"], "like": [{"_id": "ALICE"}], "min_term_freq": 1}}},
        "more_like",
    ),
    ({"query": {"script": {"script": {"source": "doc['user'].value == 'alice'"}}}}, "scripts"),
    ({"query": {"script_score": {"query": {"match_all": {}}, "script": {"source": "1"}}}}, "scripts"),
    ({"query": {"function_score": {"functions": [{"script_score": {"script": "1"}}]}}}, "scripts"),
    ({"query": {"match_all": {}}, "script_fields": {"x": {"script": "params['_source']"}}}, "script_fields"),
    ({"query": {"match_all": {}}, "sort": {"_script": {"type": "number", "script": "1"}}}, "scripts"),
    ({"query": {"percolate": {"field": "q", "index": "INDEX", "id": "ALICE"}}}, "percolate"),
    ({"query": {"has_child": {"type": "x", "query": {"match_all": {}}}}}, "has_child"),
    ({"query": {"geo_shape": {"g": {"indexed_shape": {"index": "INDEX", "id": "ALICE", "path": "g"}}}}}, "shapes"),
    ({"query": {"wrapper": {"query": "eyJtYXRjaF9hbGwiOnt9fQ=="}}}, "wrapper"),
    (
        {"query": {"match_all": {}}, "aggs": {"all": {"global": {}, "aggs": {"u": {"terms": {"field": "user"}}}}}},
        "global",
    ),
    ({"query": {"match_all": {}}, "aggs": {"s": {"significant_terms": {"field": "user"}}}}, "significant_terms"),
    (
        {"query": {"match_all": {}}, "aggs": {"u": {"terms": {"field": "user", "min_doc_count": 0}}}},
        "min_doc_count",
    ),
    ({"query": {"match_all": {}}, "suggest": {"s": {"text": "alice", "term": {"field": "user"}}}}, "suggest"),
    ({"query": {"match_all": {}}, "indices_boost": [{"INDEX": 2}]}, "indices_boost"),
    ({"query": {"match_all": {}}, "explain": True}, "explain"),
    ({"query": {"match_all": {}}, "profile": True}, "profile"),
    ({"query": {"match_all": {}}, "pit": {"id": "x"}}, "pit"),
    ({"query": {"match_all": {}}, "stored_fields": ["memory_plugin.organization_id"]}, "stored_fields"),
    ({"query": {"term": {"memory_plugin.organization_id": "org-1"}}}, "memory_plugin"),
    ({"query": {"match_all": {}}, "sort": [{"memory_plugin.user": "asc"}]}, "memory_plugin"),
    ({"query": {"match_all": {}}, "sort": ["memory_plugin.create_time"]}, "memory_plugin"),
    ({"query": {"match_all": {}}, "docvalue_fields": ["memory_plugin.organization_id"]}, "memory_plugin"),
    ({"query": {"match_all": {}}, "fields": [{"field": "memory_plugin.user"}]}, "memory_plugin"),
    (
        {"query": {"match_all": {}}, "aggs": {"o": {"terms": {"field": "memory_plugin.organization_id"}}}},
        "memory_plugin",
    ),
    ({"query": {"match_all": {}}, "collapse": {"field": "memory_plugin.user"}}, "memory_plugin"),
    ({"query": {"exists": {"field": "memory_plugin"}}}, "memory_plugin"),
    ({"query": {"match_all": {}}, "highlight": {"fields": {"memory_plugin.user": {}}}}, "memory_plugin"),
    ({"query": {"match_all": {}}, "bogus": 1}, "Unknown key for a VALUE_NUMBER in [bogus]."),
]


async def test_reads_beyond_the_callers_documents_are_refused(client, world, bob, index_prefix):  # type: ignore[no-untyped-def]
    for body, culprit in REFUSED:
        text = _dump(body).replace("ALICE", world["alice"]).replace("INDEX", f"{index_prefix}-memory-meta")
        for path in (f"{M}/_search", f"{M}/{world['bob']}/_search"):
            status, error = await call(client, bob, "POST", path, json.loads(text))
            assert status == 400, (body, error)
            assert culprit in error["error"]["reason"], (body, error)
            assert error["error"]["root_cause"][0]["type"] in ("illegal_argument_exception", "parsing_exception")
            assert error["status"] == 400
            assert_nothing_of_alice(error, world, names_internal_field=True)


async def test_opensearch_errors_are_relayed_in_its_format_with_ml_commons_index_names(
    client, world, bob, index_prefix
):  # type: ignore[no-untyped-def]
    status, error = await call(client, bob, "POST", f"{M}/_search", {"query": {"match_all": {}}, "size": 10001})
    assert status == 400, error
    assert error["error"]["type"] == "search_phase_execution_exception"
    assert "Result window is too large" in _dump(error)
    assert index_prefix not in _dump(error) and ".plugins-ml-memory-meta" in _dump(error)
    status, error = await call(
        client, bob, "POST", f"{M}/_search", {"query": {"fuzzy": {"name": {"value": 5, "x": 1}}}}
    )
    assert status == 400 and error["error"]["root_cause"][0]["type"] == "parsing_exception", error
    status, error = await call(client, bob, "POST", f"{M}/_search", {"query": {"match_all": {}}, "sort": ["name"]})
    assert status == 400 and "fielddata" in _dump(error).lower(), error  # as on the real node: name is text
    assert index_prefix not in _dump(error)
    # A bad body is a 400 even for a memory that is not the caller's, as the real node parses first.
    status, error = await call(client, bob, "POST", f"{M}/{world['alice']}/_search", {"query": {"nope": {}}})
    assert status == 400, error


async def test_queries_the_python_evaluator_lacks_run_natively(client, world, bob):  # type: ignore[no-untyped-def]
    for body in (
        {"query": {"fuzzy": {"name": {"value": "zanzibaa"}}}},
        {"query": {"multi_match": {"query": SECRET, "fields": ["name"]}}},
        {"query": {"query_string": {"query": f"{SECRET} AND bob"}}},
        {"query": {"match_phrase_prefix": {"name": "zanzibar pla"}}},
        {
            "query": {"match_all": {}},
            "aggs": {"per_day": {"date_histogram": {"field": "create_time", "calendar_interval": "day"}}},
        },
    ):
        status, found = await call(client, bob, "POST", f"{M}/_search", body)
        assert status == 200, (body, found)
        assert [hit["_id"] for hit in found["hits"]["hits"]] == [world["bob"]], body
    status, found = await call(
        client, bob, "POST", f"{M}/_search", {"query": {"match_all": {}}, "aggs": {"u": {"terms": {"field": "user"}}}}
    )
    assert found["aggregations"]["u"]["buckets"] == [{"key": "bob", "doc_count": 1}]


async def test_a_principal_without_user_sees_only_its_own_memories(client, world, admin):  # type: ignore[no-untyped-def]
    status, found = await call(client, admin, "POST", f"{M}/_search", {"query": {"match_all": {}}})
    assert status == 200 and found["hits"]["hits"] == [], found
    status, created = await call(client, admin, "POST", M, {"name": SECRET})
    status, found = await call(client, admin, "POST", f"{M}/_search", {"query": {"match": {"name": SECRET}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == [created["memory_id"]]
    assert "user" not in found["hits"]["hits"][0]["_source"]
