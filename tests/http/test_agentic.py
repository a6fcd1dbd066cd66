"""Agentic memory (ML Commons 3.3+ memory containers) over HTTP: the flow, infer, search, and every error string."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.agentic.search import hybrid_scores, min_max
from memory_plugin.background import Worker
from tests.support.agentic_llm import SEMANTIC_CONFIG, ScriptedLLM
from tests.support.polling import PATIENCE, eventually

#: Container embedding dimensions are checked against the real model (384), and ranking is the point.
pytestmark = [pytest.mark.model, pytest.mark.backends("embedded", "opensearch")]

BASE = "/_plugins/_ml/memory_containers"


async def call(api, caller, method: str, path: str, body: Any = None, status: int = 200, **kwargs: Any) -> Any:
    response = await api.request(method, BASE + path, json=body, headers=caller.headers, **kwargs)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def error(
    api, caller, method: str, path: str, body: Any, status: int, reason: str, type_: str | None = None
) -> None:
    payload = await call(api, caller, method, path, body, status)
    assert payload["status"] == status
    assert payload["error"]["reason"].startswith(reason), payload
    if type_:
        assert payload["error"]["type"] == type_


async def settle(api) -> None:
    await api.app[AGENTIC].settled()


async def container(api, caller, configuration: dict[str, Any] | None = None, **extra: Any) -> str:
    body = {"name": "agent", **extra}
    if configuration is not None:
        body["configuration"] = configuration
    created = await call(api, caller, "POST", "/_create", body)
    assert created["status"] == "created" and len(created["memory_container_id"]) == 20
    return str(created["memory_container_id"])


def conversation(*texts: str) -> list[dict[str, Any]]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": [{"type": "text", "text": t}]} for i, t in enumerate(texts)]


async def test_an_add_naming_another_owners_session_id_neither_fails_nor_touches_it(api, alice, carol):
    """Session ids are document ids in an index other owners' containers may share (OpenSearch): an add by
    someone else naming the same id must not answer 500, nor touch (or reveal) the other owner's session."""
    mine = await container(api, alice)
    theirs = await container(api, carol)
    body = {"messages": conversation("hi"), "namespace": {"session_id": "shared-id"}}
    assert (await call(api, alice, "POST", f"/{mine}/memories", body))["session_id"] == "shared-id"
    before = await call(api, alice, "GET", f"/{mine}/memories/sessions/shared-id")
    for _ in range(2):
        added = await call(api, carol, "POST", f"/{theirs}/memories", body)
        assert added["session_id"] == "shared-id" and set(added) == {"session_id", "working_memory_id"}
    assert await call(api, alice, "GET", f"/{mine}/memories/sessions/shared-id") == before
    working = await call(api, carol, "POST", f"/{theirs}/memories/working/_search", {"query": {"match_all": {}}})
    assert working["hits"]["total"]["value"] == 2


async def test_container_crud_and_defaults(api, alice):
    cid = await container(api, alice, SEMANTIC_CONFIG, description="support")
    doc = await call(api, alice, "GET", f"/{cid}")
    config = doc["configuration"]
    assert doc["name"] == "agent" and doc["description"] == "support"
    assert isinstance(doc["created_time"], int) and doc["created_time"] == doc["last_updated_time"]
    # ml-commons' User.toXContent, never a bare string (the OpenAPI schema rejects one; issue 25)
    owner = {
        "name": "alice",
        "backend_roles": [],
        "roles": [],
        "custom_attribute_names": [],
        "user_requested_tenant": None,
    }
    assert doc["owner"] == owner
    listed = await call(api, alice, "POST", "/_search", {"query": {"term": {"owner.name": "alice"}}})
    assert [(hit["_id"], hit["_source"]["owner"]) for hit in listed["hits"]["hits"]] == [(cid, owner)]
    assert config["index_prefix"] == "default" and config["use_system_index"] is True
    assert config["embedding_model_type"] == "TEXT_EMBEDDING" and config["max_infer_size"] == 5
    assert config["disable_history"] is False and config["disable_session"] is False
    [strategy] = config["strategies"]
    assert strategy["type"] == "SEMANTIC" and strategy["enabled"] is True and strategy["namespace"] == ["user_id"]
    assert strategy["id"].startswith("semantic_") and len(strategy["id"]) == len("semantic_") + 8

    updated = await call(
        api,
        alice,
        "PUT",
        f"/{cid}",
        {
            "name": "renamed",
            "configuration": {
                "strategies": [
                    {"id": strategy["id"], "enabled": False, "namespace": ["user_id", "session_id"]},
                    {"type": "USER_PREFERENCE", "namespace": ["user_id"]},
                ]
            },
        },
    )
    assert updated["result"] == "updated" and updated["_version"] == 2
    assert updated["_index"] == ".plugins-ml-am-memory-container"
    doc = await call(api, alice, "GET", f"/{cid}")
    assert doc["name"] == "renamed"
    first, second = doc["configuration"]["strategies"]
    assert first == {**strategy, "enabled": False, "namespace": ["user_id", "session_id"]}
    assert second["type"] == "USER_PREFERENCE" and second["id"].startswith("user_preference_")

    found = await call(api, alice, "POST", "/_search", {"query": {"match": {"name": "renamed"}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == [cid]
    assert found["hits"]["hits"][0]["_version"] == 2 and "_seq_no" in found["hits"]["hits"][0]

    deleted = await call(api, alice, "DELETE", f"/{cid}")
    assert deleted["result"] == "deleted" and deleted["forced_refresh"] is True
    await error(
        api,
        alice,
        "GET",
        f"/{cid}",
        None,
        404,
        f"Failed to find memory container with the provided memory container id: {cid}",
        "status_exception",
    )


async def test_add_working_memory_sessions_and_reads(api, alice):
    cid = await container(api, alice)  # no configuration: working and sessions only, and no LLM, so no auto session
    added = await call(
        api,
        alice,
        "POST",
        f"/{cid}/memories",
        {
            "messages": conversation("hi", "hello"),
            "namespace": {"user_id": "bob", "n": 1},
            "metadata": {"b": {"a": 1}},
            "tags": {"topic": "greeting"},
        },
    )
    assert set(added) == {"working_memory_id"}
    working = await call(api, alice, "GET", f"/{cid}/memories/working/{added['working_memory_id']}")
    assert working["payload_type"] == "conversational" and working["messages"] == conversation("hi", "hello")
    assert working["namespace"] == {"user_id": "bob", "n": "1"} and working["metadata"] == {"b": '{"a":1}'}
    assert "namespace_size" not in working and working["infer"] is False and working["owner_id"] == "alice"

    with_session = await call(
        api,
        alice,
        "POST",
        f"/{cid}/memories",
        {"messages": conversation("again"), "namespace": {"user_id": "bob", "session_id": "s-1"}},
    )
    assert with_session["session_id"] == "s-1"
    session = await call(api, alice, "GET", f"/{cid}/memories/sessions/s-1")
    assert session["namespace"] == {"session_id": "s-1"} and session["memory_container_id"] == cid

    created = await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s-2", "summary": "custom"})
    assert created == {"session_id": "s-2", "status": "created"}
    again = await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s-2"})
    assert again == {"session_id": "s-2", "status": "exists"}
    auto = await call(
        api, alice, "POST", f"/{cid}/memories/sessions", {"summary": "x", "namespace": {"user_id": "bob"}}
    )
    assert auto["status"] == "created" and len(auto["session_id"]) == 20

    found = await call(
        api,
        alice,
        "GET",
        f"/{cid}/memories/sessions/_search",
        {"query": {"match_all": {}}, "sort": [{"created_time": "asc"}]},
    )
    assert [hit["_id"] for hit in found["hits"]["hits"]] == ["s-1", "s-2", auto["session_id"]]
    by_user = await call(
        api,
        alice,
        "POST",
        f"/{cid}/memories/working/_search",
        {"query": {"bool": {"filter": [{"term": {"namespace.user_id": "bob"}}]}}},
    )
    assert by_user["hits"]["total"]["value"] == 2
    assert by_user["hits"]["hits"][0]["_index"] == ".plugins-ml-am-default-memory-working"
    nested = await call(
        api,
        alice,
        "GET",
        f"/{cid}/memories/working/_search",
        {"query": {"nested": {"path": "messages", "query": {"match": {"messages.content.text": "again"}}}}},
    )
    assert nested["hits"]["total"]["value"] == 1

    updated = await call(api, alice, "PUT", f"/{cid}/memories/sessions/s-2", {"summary": "new", "name": "ignored"})
    assert updated["result"] == "updated" and updated["_version"] == 2
    assert (await call(api, alice, "GET", f"/{cid}/memories/sessions/s-2"))["summary"] == "new"
    deleted = await call(api, alice, "DELETE", f"/{cid}/memories/working/{added['working_memory_id']}")
    assert deleted["result"] == "deleted"
    await error(
        api, alice, "GET", f"/{cid}/memories/working/{added['working_memory_id']}", None, 404, "Memory not found"
    )
    by_query = await call(
        api, alice, "POST", f"/{cid}/memories/sessions/_delete_by_query", {"query": {"match_all": {}}}
    )
    assert by_query["deleted"] == 3 and by_query["total"] == 3 and by_query["requests_per_second"] == -1.0


async def long_term(api, caller, cid: str) -> list[dict[str, Any]]:
    found = await call(
        api, caller, "POST", f"/{cid}/memories/long-term/_search", {"query": {"match_all": {}}, "size": 100}
    )
    return [hit["_source"] | {"_id": hit["_id"]} for hit in found["hits"]["hits"]]


async def history(api, caller, cid: str) -> list[dict[str, Any]]:
    found = await call(
        api,
        caller,
        "GET",
        f"/{cid}/memories/history/_search",
        {"query": {"match_all": {}}, "sort": [{"created_time": "asc"}], "size": 100},
    )
    return [hit["_source"] for hit in found["hits"]["hits"]]


async def test_infer_adds_updates_deletes_with_history(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    llm.facts = lambda kind, messages: ["Bob drinks green tea every morning", "Bob lives in Lisbon"]
    added = await call(
        api,
        alice,
        "POST",
        f"/{cid}/memories",
        {
            "messages": conversation("I drink green tea every morning and live in Lisbon", "Noted!"),
            "namespace": {"user_id": "bob"},
            "tags": {"topic": "profile"},
            "infer": True,
        },
    )
    # llm_id is set and no session_id was given: the LLM titles a new session
    assert set(added) == {"session_id", "working_memory_id"}
    session = await call(api, alice, "GET", f"/{cid}/memories/sessions/{added['session_id']}")
    assert session["summary"] == "Billing question" and session["namespace"] == {"user_id": "bob"}
    await settle(api)
    memories = {m["memory"]: m for m in await long_term(api, alice, cid)}
    assert set(memories) == {"Bob drinks green tea every morning", "Bob lives in Lisbon"}
    tea = memories["Bob drinks green tea every morning"]
    assert tea["namespace"] == {"user_id": "bob"} and tea["namespace_size"] == 1  # only the strategy's keys
    assert (
        tea["strategy_type"] == "SEMANTIC"
        and tea["tags"] == {"topic": "profile"}
        and len(tea["memory_embedding"]) == 384
    )
    one = await call(api, alice, "GET", f"/{cid}/memories/long-term/{tea['_id']}")
    assert "memory_container_id" not in one and len(one["memory_embedding"]) == 384
    # one run's records share a millisecond, so within a run the order is not defined
    assert sorted((h["action"], h["after"]["memory"]) for h in await history(api, alice, cid)) == [
        ("ADD", "Bob drinks green tea every morning"),
        ("ADD", "Bob lives in Lisbon"),
    ]

    # The decision sees the similar old memories and updates one, deletes the other
    def decide(old, facts):
        assert {o["text"] for o in old} >= {"Bob drinks green tea every morning"}
        assert all(0.5 <= o["score"] <= 1.0 for o in old)
        by_text = {o["text"]: o["id"] for o in old}
        return [
            {
                "id": by_text["Bob drinks green tea every morning"],
                "text": "Bob switched from green tea to coffee",
                "event": "UPDATE",
                "old_memory": "Bob drinks green tea every morning",
            },
            {"id": by_text.get("Bob lives in Lisbon", "x"), "text": "Bob lives in Lisbon", "event": "DELETE"},
            {"id": "someone-else", "text": "ignored", "event": "DELETE"},
        ]

    llm.facts = lambda kind, messages: ["Bob switched to coffee"]
    llm.decide = decide
    await call(
        api,
        alice,
        "POST",
        f"/{cid}/memories",
        {
            "messages": conversation("I drink coffee now"),
            "namespace": {"user_id": "bob", "session_id": added["session_id"]},
            "infer": True,
        },
    )
    await settle(api)
    assert [m["memory"] for m in await long_term(api, alice, cid)] == ["Bob switched from green tea to coffee"]
    actions = [(h["action"], h.get("before"), h.get("after")) for h in await history(api, alice, cid)][2:]
    assert sorted(actions, key=str) == [
        ("DELETE", {"memory": "Bob lives in Lisbon"}, None),
        (
            "UPDATE",
            {"memory": "Bob drinks green tea every morning"},
            {"memory": "Bob switched from green tea to coffee"},
        ),
    ]
    # the updated text was embedded again: semantic search finds it by meaning
    found = await call(
        api, alice, "POST", f"/{cid}/memories/long-term/_semantic_search", {"query": "What does Bob drink?"}
    )
    assert found["hits"]["hits"][0]["_source"]["memory"] == "Bob switched from green tea to coffee"
    assert "memory_embedding" not in found["hits"]["hits"][0]["_source"]
    assert llm.api_keys[-1] == "Bearer sk-test"


async def test_infer_failures_become_error_records(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    body = {"messages": conversation("hello"), "namespace": {"user_id": "bob", "session_id": "s"}, "infer": True}
    llm.fail_with = 500
    assert "working_memory_id" in await call(api, alice, "POST", f"/{cid}/memories", body)
    await settle(api)
    llm.fail_with, llm.raw_content = None, "I cannot answer in JSON"
    await call(api, alice, "POST", f"/{cid}/memories", body)
    await settle(api)
    errors = await history(api, alice, cid)
    assert [("action" in e, e["namespace"]) for e in errors] == [(False, {"user_id": "bob"})] * 2
    assert "500" in errors[0]["error"] and "no JSON object" in errors[1]["error"]
    assert await long_term(api, alice, cid) == []


async def test_a_run_that_fails_after_its_llm_call_is_retried_with_the_kept_answer(api, alice, llm, monkeypatch):
    """A store failure after the extraction (the k-NN search of a container index another process is still
    creating answered 503) fails the run, which is retried: with the answer kept with its job, not a new call."""
    store = api.app[AGENTIC].store
    knn, failures = store.knn, []

    async def failing_once(*args: Any) -> Any:
        if not failures:
            failures.append(args)
            raise RuntimeError("search_phase_execution_exception")
        return await knn(*args)

    monkeypatch.setattr(store, "knn", failing_once)
    cid = await container(api, alice, SEMANTIC_CONFIG)
    llm.facts = lambda kind, messages: ["Bob keeps bees"]
    body = {"messages": conversation("I keep bees"), "namespace": {"user_id": "bob", "session_id": "s"}, "infer": True}
    await call(api, alice, "POST", f"/{cid}/memories", body)
    await settle(api)
    assert failures, "the run never searched"
    assert [memory["memory"] for memory in await long_term(api, alice, cid)] == ["Bob keeps bees"]
    assert len(llm.requests) == 1, "the retry called the LLM again"


async def test_strategy_fires_only_with_all_its_keys(api, alice, llm):
    configuration = {
        **SEMANTIC_CONFIG,
        "strategies": [
            {"type": "SEMANTIC", "namespace": ["user_id", "session_id"]},
            {"type": "user_preference", "namespace": ["agent_id"]},
        ],
    }
    cid = await container(api, alice, configuration)
    llm.facts = lambda kind, messages: [f"{kind} fact"]
    await call(
        api,
        alice,
        "POST",
        f"/{cid}/memories",
        {
            "messages": conversation("hi"),
            "namespace": {"user_id": "bob", "session_id": "s1", "other": "x"},
            "infer": True,
        },
    )
    await settle(api)
    [memory] = await long_term(api, alice, cid)
    assert memory["memory"] == "SEMANTIC fact"
    assert memory["namespace"] == {"user_id": "bob", "session_id": "s1"} and memory["namespace_size"] == 2
    await call(
        api,
        alice,
        "POST",
        f"/{cid}/memories",
        {"messages": conversation("hi"), "namespace": {"agent_id": "a1"}, "infer": True},
    )
    await settle(api)
    kinds = sorted(m["strategy_type"] for m in await long_term(api, alice, cid))
    assert kinds == ["SEMANTIC", "USER_PREFERENCE"]
    # consolidation sees only its own scope: a new session of bob's adds, it does not see s1's memory
    llm.decide = lambda old, facts: pytest.fail("no similar memory exists in this scope")
    await call(
        api,
        alice,
        "POST",
        f"/{cid}/memories",
        {"messages": conversation("hi"), "namespace": {"user_id": "bob", "session_id": "s2"}, "infer": True},
    )
    await settle(api)
    assert len(await long_term(api, alice, cid)) == 3
    assert not [h for h in await history(api, alice, cid) if "error" in h]


def test_min_max_and_weighted_mean():
    assert min_max({}) == {}
    assert min_max({"a": 3.0}) == {"a": 1.0}
    assert min_max({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.001, "b": 1.0, "c": 0.5}
    combined = hybrid_scores({"a": 2.0, "b": 4.0}, {"b": 0.6, "c": 0.9}, 0.3, 0.7)
    # the same products and sums in another order: pytest.approx's relative 1e-6 covers the last bits
    assert combined == pytest.approx({"a": 0.3 * 0.001, "b": 0.3 * 1.0 + 0.7 * 0.001, "c": 0.7 * 1.0})


async def seed_long_term(api, caller, cid: str, llm: ScriptedLLM, facts: list[str], user: str = "bob") -> None:
    llm.facts = lambda kind, messages: facts
    await call(
        api,
        caller,
        "POST",
        f"/{cid}/memories",
        {"messages": conversation("..."), "namespace": {"user_id": user, "session_id": "s"}, "infer": True},
    )
    await settle(api)


async def test_settle_waits_for_an_infer_write_still_in_flight(api, alice, llm, monkeypatch):
    """On OpenSearch one bulk becomes visible shard by shard: its job can vanish before its memories appear."""
    store = api.app[AGENTIC].store
    apply_infer, in_flight, release = store.apply_infer, asyncio.Event(), asyncio.Event()

    async def half_visible_apply(*args: Any) -> None:
        in_flight.set()
        await release.wait()
        await apply_infer(*args)

    async def jobs_already_gone(limit: int) -> list[Any]:
        return [] if in_flight.is_set() else await real_jobs(limit)

    real_jobs = store.infer_jobs
    monkeypatch.setattr(store, "apply_infer", half_visible_apply)
    monkeypatch.setattr(store, "infer_jobs", jobs_already_gone)
    cid = await container(api, alice, SEMANTIC_CONFIG)
    llm.facts = lambda kind, messages: ["Bob keeps bees"]
    body = {"messages": conversation("..."), "namespace": {"user_id": "bob"}, "infer": True}
    await call(api, alice, "POST", f"/{cid}/memories", body)
    await asyncio.wait_for(in_flight.wait(), 30)
    infer, looks = api.app[AGENTIC].infer, 0
    busy = Worker.busy

    def counted(worker: Worker) -> bool:
        nonlocal looks
        looks += worker is infer
        return busy.fget(worker)  # type: ignore[misc]

    monkeypatch.setattr(Worker, "busy", property(counted))
    settling = asyncio.create_task(settle(api))
    await eventually(lambda: looks >= 3 or settling.done(), "settle looks at the infer worker three times")
    assert not settling.done()  # it saw the write in flight each time, and waits on
    release.set()
    await asyncio.wait_for(settling, 60)
    assert [memory["memory"] for memory in await long_term(api, alice, cid)] == ["Bob keeps bees"]


async def test_semantic_and_hybrid_search(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    await seed_long_term(
        api,
        alice,
        cid,
        llm,
        [
            "The customer's router model is the Fritzbox 7590",
            "The customer prefers to be called in the afternoon",
            "The invoice number INV-4471 was charged twice",
        ],
    )
    await seed_long_term(api, alice, cid, llm, ["Carla's router is a Netgear"], user="carla")
    path = f"/{cid}/memories/long-term"
    semantic = await call(
        api,
        alice,
        "POST",
        path + "/_semantic_search",
        {"query": "when to phone the client", "k": 2, "namespace": {"user_id": "bob"}},
    )
    hits = semantic["hits"]["hits"]
    assert len(hits) == 2 and hits[0]["_source"]["memory"] == "The customer prefers to be called in the afternoon"
    assert all(0.5 < h["_score"] <= 1.0 for h in hits) and hits[0]["_score"] >= hits[1]["_score"]
    assert hits[0]["_index"] == ".plugins-ml-am-default-memory-long-term"
    only_carla = await call(
        api, alice, "POST", path + "/_semantic_search", {"query": "router", "namespace": {"user_id": "carla"}}
    )
    assert [h["_source"]["memory"] for h in only_carla["hits"]["hits"]] == ["Carla's router is a Netgear"]
    filtered = await call(
        api,
        alice,
        "GET",
        path + "/_semantic_search",
        {"query": "router", "filter": {"term": {"namespace.user_id": "bob"}}, "min_score": 0.8},
    )
    memories = [h["_source"]["memory"] for h in filtered["hits"]["hits"]]
    assert (
        memories[0] == "The customer's router model is the Fritzbox 7590"
        and "Carla's router is a Netgear" not in memories
    )
    assert all(h["_score"] >= 0.8 for h in filtered["hits"]["hits"])
    strict = await call(api, alice, "POST", path + "/_semantic_search", {"query": "router", "min_score": 0.999})
    assert strict["hits"]["hits"] == [] and strict["hits"]["total"]["value"] == 0

    # An exact token only BM25 can see: the hybrid search puts it first, within 0..1
    hybrid = await call(
        api,
        alice,
        "POST",
        path + "/_hybrid_search",
        {"query": "INV-4471", "k": 3, "bm25_weight": 0.7, "neural_weight": 0.3},
    )
    hits = hybrid["hits"]["hits"]
    assert hits[0]["_source"]["memory"] == "The invoice number INV-4471 was charged twice"
    assert hits[0]["_score"] == pytest.approx(1.0, abs=1e-6) or hits[0]["_score"] > 0.7
    assert all(0.0 <= h["_score"] <= 1.0 for h in hits) and len(hits) <= 3
    neural_only = await call(
        api, alice, "POST", path + "/_hybrid_search", {"query": "INV-4471", "bm25_weight": 0, "neural_weight": 1}
    )
    assert neural_only["hits"]["hits"][0]["_score"] == pytest.approx(1.0)


async def test_a_hybrid_search_ranks_by_bm25_while_the_model_embeds_its_query(api, alice, llm, monkeypatch):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    await seed_long_term(api, alice, cid, llm, ["The invoice number INV-4471 was charged twice"])
    searcher = api.app[AGENTIC].search
    store, models = searcher.ranking, searcher.models
    lexical_started = asyncio.Event()
    bm25, query_vector = store.bm25, models.query_vector

    async def bm25_started(*args: Any) -> Any:
        lexical_started.set()
        return await bm25(*args)

    async def embed_after_bm25_started(*args: Any) -> Any:
        await asyncio.wait_for(lexical_started.wait(), PATIENCE)  # one after the other, this waits in vain
        return await query_vector(*args)

    monkeypatch.setattr(store, "bm25", bm25_started)
    monkeypatch.setattr(models, "query_vector", embed_after_bm25_started)
    found = await call(api, alice, "POST", f"/{cid}/memories/long-term/_hybrid_search", {"query": "INV-4471"})
    assert [h["_source"]["memory"] for h in found["hits"]["hits"]] == ["The invoice number INV-4471 was charged twice"]


MULTILINGUAL = [
    "Der Kunde möchte seine Rechnungen künftig per E-Mail erhalten.",
    "El cliente tiene un perro llamado Max.",
    "Le client part en vacances au Japon en avril.",
    "The customer is allergic to peanuts.",
    "顧客はパスワードをリセットしたいと言っています。",
    "Клиент переезжает в Берлин в следующем месяце.",
]
#: Every query is in another language than its memory.  The small e5 model is weaker across languages on
#: generic questions ("Hat der Kunde ein Haustier?" ranks the German memory first); these name the topic.
CROSS_LANGUAGE_QUERIES = [
    ("invoices sent by email", 0),
    ("Hat der Kunde einen Hund?", 1),
    ("Does the customer have a pet?", 1),
    ("犬の名前は何ですか", 1),
    ("¿Adónde viaja el cliente de vacaciones?", 2),
    ("vacation in Japan in April", 2),
    ("¿El cliente tiene alergia a los cacahuetes?", 3),
    ("Ist der Kunde allergisch gegen Erdnüsse?", 3),
    ("The user forgot their password and cannot log in", 4),
    ("Кто хочет сбросить пароль?", 4),
    ("Le client déménage à Berlin", 5),
    ("moving to Berlin", 5),
]


async def test_multilingual_semantic_search_ranks_the_right_memory_first(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    await seed_long_term(api, alice, cid, llm, MULTILINGUAL)
    for query, expected in CROSS_LANGUAGE_QUERIES:
        found = await call(api, alice, "POST", f"/{cid}/memories/long-term/_semantic_search", {"query": query, "k": 3})
        top = found["hits"]["hits"][0]["_source"]["memory"]
        assert top == MULTILINGUAL[expected], (query, [h["_source"]["memory"] for h in found["hits"]["hits"]])
