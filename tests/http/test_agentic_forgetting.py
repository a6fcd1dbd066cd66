"""Forgetting that cascades (``memory_plugin/agentic/forgetting.py``), end to end over HTTP with a scripted LLM:
a fact from a deleted working memory is no longer found by semantic search and no history entry quotes it; a
fact from several sources survives one; sessions, delete by query, user erasure, ``disable_history``, and an
infer run racing the delete.  Runs on both backends (``backend``); what only a cluster shows is in
``tests/opensearch/test_agentic_forgetting_opensearch.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_plugin.agentic.models import HISTORY, LONG_TERM
from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.auth import Principal
from tests.http.test_agentic import SEMANTIC_CONFIG, call, container, conversation, history, long_term, settle
from tests.support.agentic_llm import ScriptedLLM
from tests.support.erasure import erase
from tests.support.polling import eventually

pytestmark = [pytest.mark.model, pytest.mark.backends("embedded", "opensearch")]
ML_DELETE_KEYS = {"_index", "_id", "_version", "result", "forced_refresh", "_shards", "_seq_no", "_primary_term"}


async def add(api, caller, cid: str, llm: ScriptedLLM, facts: list[str], user: str = "bob", **namespace: str) -> str:
    """An inferring add whose extraction answers ``facts``; settled.  Returns the working memory id.  A session
    id is always given, so that no LLM call titles a new session."""
    llm.facts = lambda kind, messages: facts
    namespace = {"user_id": user, "session_id": "s0", **namespace}
    body = {"messages": conversation(*facts), "namespace": namespace, "infer": True}
    added = await call(api, caller, "POST", f"/{cid}/memories", body)
    await settle(api)
    return str(added["working_memory_id"])


async def semantic(api, caller, cid: str, query: str) -> list[str]:
    found = await call(api, caller, "POST", f"/{cid}/memories/long-term/_semantic_search", {"query": query, "k": 10})
    return [hit["_source"]["memory"] for hit in found["hits"]["hits"]]


def quoting(entries: list[dict[str, Any]], word: str) -> list[dict[str, Any]]:
    return [entry for entry in entries if word.lower() in json.dumps(entry).lower()]


async def test_a_fact_from_a_deleted_working_memory_is_forgotten(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    bees = await add(api, alice, cid, llm, ["Bob keeps bees in his garden"])
    cello = await add(api, alice, cid, llm, ["Bob plays the cello on Sundays"])
    assert "Bob keeps bees in his garden" in await semantic(api, alice, cid, "bees in the garden")
    # the sources are ours: no answer shows them
    memories = await long_term(api, alice, cid)
    assert len(memories) == 2 and not any("memory_sources" in memory for memory in memories)
    one = await call(api, alice, "GET", f"/{cid}/memories/long-term/{memories[0]['_id']}")
    assert "memory_sources" not in one
    assert not any("memory_sources" in entry for entry in await history(api, alice, cid))
    bees_id = next(m["_id"] for m in memories if "bees" in m["memory"])

    deleted = await call(api, alice, "DELETE", f"/{cid}/memories/working/{bees}", params={"report": "true"})
    assert set(deleted) == ML_DELETE_KEYS | {"forgotten"} and deleted["result"] == "deleted"
    report = deleted["forgotten"]
    assert report["working_memories"] == [bees] and report["long_term_deleted"] == [bees_id]
    assert report["long_term_kept"] == [] and len(report["history_deleted"]) == 1

    assert "Bob keeps bees in his garden" not in await semantic(api, alice, cid, "bees in the garden")
    assert [m["memory"] for m in await long_term(api, alice, cid)] == ["Bob plays the cello on Sundays"]
    assert quoting(await history(api, alice, cid), "bees") == []
    assert len(await history(api, alice, cid)) == 1
    await call(api, alice, "GET", f"/{cid}/memories/working/{bees}", status=404)
    # without ?report the answer is ml-commons' delete response, exactly
    plain = await call(api, alice, "DELETE", f"/{cid}/memories/working/{cello}")
    assert set(plain) == ML_DELETE_KEYS
    assert await long_term(api, alice, cid) == [] and await history(api, alice, cid) == []
    # deleting again is a 404, and finds nothing more to forget
    await call(api, alice, "DELETE", f"/{cid}/memories/working/{cello}", status=404)


def update_first(text: str):  # type: ignore[no-untyped-def]
    """A decision that updates the first old memory to ``text``."""

    def decide(old: list[dict[str, Any]], facts: list[str]) -> list[dict[str, Any]]:
        return [{"id": old[0]["id"], "text": text, "event": "UPDATE", "old_memory": old[0]["text"]}]

    return decide


async def test_a_fact_from_several_sources_keeps_the_others(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    first = await add(api, alice, cid, llm, ["Bob drinks green tea"])
    llm.decide = update_first("Bob drinks green tea with honey")
    second = await add(api, alice, cid, llm, ["Bob takes honey in his tea"])
    [memory] = await long_term(api, alice, cid)
    assert memory["memory"] == "Bob drinks green tea with honey"

    # The first source goes: the fact stays (the second still supports it), with its text as the second wrote
    # it; the first's ADD entry is dropped, and the second's UPDATE no longer quotes the first's text.
    deleted = await call(api, alice, "DELETE", f"/{cid}/memories/working/{first}", params={"report": "true"})
    assert deleted["forgotten"]["long_term_kept"] == [memory["_id"]]
    assert deleted["forgotten"]["long_term_deleted"] == [] and len(deleted["forgotten"]["history_deleted"]) == 1
    assert len(deleted["forgotten"]["history_redacted"]) == 1
    [kept] = await long_term(api, alice, cid)
    assert kept["memory"] == "Bob drinks green tea with honey" and kept["_id"] == memory["_id"]
    [entry] = await history(api, alice, cid)
    assert entry["action"] == "UPDATE" and entry["before"]["memory"] == "[forgotten]"
    assert entry["after"]["memory"] == "Bob drinks green tea with honey"
    await settle(api)
    assert "Bob drinks green tea with honey" in await semantic(api, alice, cid, "tea with honey")

    # The last source goes: so does the fact, and every history entry about it
    await call(api, alice, "DELETE", f"/{cid}/memories/working/{second}")
    assert await long_term(api, alice, cid) == [] and await history(api, alice, cid) == []
    assert await semantic(api, alice, cid, "tea with honey") == []


async def test_when_the_source_that_wrote_the_text_goes_the_text_rolls_back(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    await add(api, alice, cid, llm, ["Bob drinks green tea"])
    llm.decide = update_first("Bob drinks green tea and lives in Porto")
    porto = await add(api, alice, cid, llm, ["Bob lives in Porto"])
    deleted = await call(api, alice, "DELETE", f"/{cid}/memories/working/{porto}", params={"report": "true"})
    assert len(deleted["forgotten"]["long_term_kept"]) == 1
    [kept] = await long_term(api, alice, cid)
    assert kept["memory"] == "Bob drinks green tea"
    assert quoting(await history(api, alice, cid), "porto") == []
    await settle(api)  # the rolled-back text is embedded again: nothing about Porto is found by its meaning
    assert await semantic(api, alice, cid, "Porto") == ["Bob drinks green tea"]
    assert "Porto" not in json.dumps(await call(api, alice, "GET", f"/{cid}/memories/long-term/{kept['_id']}"))


async def test_a_manual_edit_keeps_the_sources(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    working = await add(api, alice, cid, llm, ["Bob has a cat"])
    [memory] = await long_term(api, alice, cid)
    await call(api, alice, "PUT", f"/{cid}/memories/long-term/{memory['_id']}", {"memory": "Bob has two cats"})
    await call(api, alice, "DELETE", f"/{cid}/memories/working/{working}")
    assert await long_term(api, alice, cid) == []


async def test_deleting_a_session_forgets_its_working_memories(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    one = await add(api, alice, cid, llm, ["Bob is allergic to peanuts"], session_id="s1")
    two = await add(api, alice, cid, llm, ["Bob runs marathons"], session_id="s1")
    other = await add(api, alice, cid, llm, ["Bob speaks Danish"], session_id="s2")
    deleted = await call(api, alice, "DELETE", f"/{cid}/memories/sessions/s1", params={"report": "true"})
    report = deleted["forgotten"]
    assert report["sessions"] == ["s1"] and report["working_memories"] == sorted([one, two])
    assert len(report["long_term_deleted"]) == 2 and len(report["history_deleted"]) == 2
    for working in (one, two):
        await call(api, alice, "GET", f"/{cid}/memories/working/{working}", status=404)
    await call(api, alice, "GET", f"/{cid}/memories/working/{other}")
    assert [m["memory"] for m in await long_term(api, alice, cid)] == ["Bob speaks Danish"]
    assert quoting(await history(api, alice, cid), "peanuts") == []
    assert "Bob is allergic to peanuts" not in await semantic(api, alice, cid, "peanut allergy")


async def test_delete_by_query_on_working_memory_forgets_what_it_matched(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    await add(api, alice, cid, llm, ["Bob collects stamps"], user="bob")
    await add(api, alice, cid, llm, ["Dave collects coins"], user="dave")
    query = {"query": {"term": {"namespace.user_id": "bob"}}}
    deleted = await call(api, alice, "POST", f"/{cid}/memories/working/_delete_by_query", query)
    assert deleted["deleted"] == 1 and deleted["total"] == 1
    assert [m["memory"] for m in await long_term(api, alice, cid)] == ["Dave collects coins"]
    assert quoting(await history(api, alice, cid), "stamps") == []


async def test_erasing_a_user_forgets_them_in_the_organisation_containers(api, admin, alice, llm):
    shared = await container(api, admin, SEMANTIC_CONFIG)
    await add(api, admin, shared, llm, ["Bob's passport number is X123"], user="bob", session_id="sb")
    await add(api, admin, shared, llm, ["Dave likes jazz"], user="dave", session_id="sd")
    own = await container(api, alice, SEMANTIC_CONFIG)
    await add(api, alice, own, llm, ["Bob's sister is called Ann"])
    status, erased = await erase(api, admin, **{"filter[user_id]": "bob"})
    assert status == 200, erased
    report = erased["data"]["forgotten_agentic_memories"]
    assert len(report["working_memories"]) == 1 and len(report["long_term_deleted"]) == 1
    assert report["sessions"] == ["sb"] and "long_term_kept" not in report  # only what was found
    assert [m["memory"] for m in await long_term(api, admin, shared)] == ["Dave likes jazz"]
    assert quoting(await history(api, admin, shared), "passport") == []
    working = await call(api, admin, "POST", f"/{shared}/memories/working/_search", {"query": {"match_all": {}}})
    assert quoting([hit["_source"] for hit in working["hits"]["hits"]], "passport") == []
    await call(api, admin, "GET", f"/{shared}/memories/sessions/sb", status=404)
    await call(api, admin, "GET", f"/{shared}/memories/sessions/sd")
    # another user's own container is theirs: erasing bob leaves alice's
    assert [m["memory"] for m in await long_term(api, alice, own)] == ["Bob's sister is called Ann"]
    # erasing alice deletes her containers whole, as before
    status, erased = await erase(api, admin, **{"filter[user_id]": "alice"})
    assert status == 200 and erased["data"]["deleted_memory_containers"] == 1
    await call(api, alice, "GET", f"/{own}", status=404)


async def test_disable_history_writes_none_and_a_delete_leaves_nothing(api, alice, llm):
    cid = await container(api, alice, {**SEMANTIC_CONFIG, "disable_history": True})
    working = await add(api, alice, cid, llm, ["Bob's PIN is 4321"])
    llm.fail_with = 500
    await add(api, alice, cid, llm, ["an LLM failure writes no error record either"])
    llm.fail_with = None
    store, owner = api.app[AGENTIC].store, Principal("org-1", "alice")
    assert await store.docs(owner, cid, HISTORY) == []
    await call(api, alice, "GET", f"/{cid}/memories/history/any", status=404)
    await call(api, alice, "DELETE", f"/{cid}/memories/working/{working}")
    assert await store.docs(owner, cid, LONG_TERM) == [] and await store.docs(owner, cid, HISTORY) == []
    assert await store.infer_jobs(10) == []


async def test_a_working_memory_deleted_while_its_infer_job_runs_leaves_no_fact(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    llm.facts = lambda kind, messages: ["Bob's new address is 5 Elm Street"]
    llm.hang = {"SEMANTIC"}
    namespace = {"user_id": "bob", "session_id": "s0"}
    body = {"messages": conversation("I moved to 5 Elm Street"), "namespace": namespace, "infer": True}
    working = (await call(api, alice, "POST", f"/{cid}/memories", body))["working_memory_id"]
    await eventually(
        lambda: any("Elm Street" in json.dumps(request) for request in llm.requests),
        "the job has read the message and waits for the LLM",
    )
    deleted = await call(api, alice, "DELETE", f"/{cid}/memories/working/{working}", params={"report": "true"})
    assert deleted["forgotten"]["infer_jobs_deleted"] == 1
    llm.release.set()
    await settle(api)
    assert await long_term(api, alice, cid) == [] and await history(api, alice, cid) == []


async def test_a_run_that_applies_after_its_source_went_is_undone(api, alice, llm, monkeypatch):
    """The narrowest race: the cascade has deleted the working memory and looked for what cites it just
    before the run's write lands.  The run checks its source after writing, and forgets it again."""
    store = api.app[AGENTIC].store
    owner = Principal("org-1", "alice")
    cid = await container(api, alice, SEMANTIC_CONFIG)
    kept = await add(api, alice, cid, llm, ["Bob drinks green tea"])
    apply_infer = store.apply_infer

    async def source_deleted_just_before(job: Any, changes: Any, history_entries: Any) -> None:
        await store.delete(owner, cid, "working", job.request["working_memory_id"])  # the cascade's first step
        await apply_infer(job, changes, history_entries)

    monkeypatch.setattr(store, "apply_infer", source_deleted_just_before)
    llm.decide = lambda old, facts: [
        {"id": old[0]["id"], "text": "Bob drinks green tea in Oslo", "event": "UPDATE"},
        {"id": "new", "text": "Bob moved to Oslo", "event": "ADD"},
    ]
    await add(api, alice, cid, llm, ["Bob moved to Oslo"])
    # the ADD is gone, the UPDATE rolled back, and no history entry quotes Oslo
    assert [m["memory"] for m in await long_term(api, alice, cid)] == ["Bob drinks green tea"]
    assert quoting(await history(api, alice, cid), "oslo") == []
    await call(api, alice, "GET", f"/{cid}/memories/working/{kept}")


async def test_with_forgetting_off_deletes_are_ml_commons(api, alice, llm):
    """``agentic_forgetting = false``: a delete removes the one doc, as ml-commons does."""
    service = api.app[AGENTIC]
    service.forgetting.enabled = service.infer.forgetting = False
    cid = await container(api, alice, SEMANTIC_CONFIG)
    working = await add(api, alice, cid, llm, ["Bob keeps bees"], session_id="s1")
    deleted = await call(api, alice, "DELETE", f"/{cid}/memories/sessions/s1", params={"report": "true"})
    assert deleted["forgotten"]["working_memories"] == []
    await call(api, alice, "GET", f"/{cid}/memories/working/{working}")  # a session delete leaves its working
    await call(api, alice, "DELETE", f"/{cid}/memories/working/{working}")
    assert [m["memory"] for m in await long_term(api, alice, cid)] == ["Bob keeps bees"]
