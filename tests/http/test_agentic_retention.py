"""Memory retention (ml-commons 3.8-3.9) and custom container ids (3.9): docs/agentic-retention.md.

Runs on both backends (``backend``: the embedded store, and OpenSearch in the full suite).
"""

from __future__ import annotations

from typing import Any

import pytest

from memory_plugin.agentic.models import now_millis
from memory_plugin.agentic.retention import DAY_MILLIS
from memory_plugin.agentic.retention_settings import RetentionDefaults
from memory_plugin.agentic.retention_views import plan_view
from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.app import create_app
from memory_plugin.auth import KeyStore, Principal
from tests.conftest import Caller
from tests.http.test_agentic import call, container, conversation, error, seed_long_term
from tests.http.test_agentic_sharing import role_caller
from tests.support.agentic_llm import SEMANTIC_CONFIG, ScriptedLLM
from tests.support.polling import eventually

pytestmark = pytest.mark.backends("embedded", "opensearch")


@pytest.fixture
async def api(aiohttp_client, settings, embedder, llm, alice, bob, carol, admin):  # type: ignore[no-untyped-def]
    settings = settings.replace(
        agentic={
            "llm": {"url": str(llm.server.make_url("/v1/chat/completions")), "api_key": "sk-test"},
            "retention": {"enabled": True},
        }
    )
    return await aiohttp_client(create_app(settings, embedder=embedder))


@pytest.fixture
def dave(keys: KeyStore) -> Caller:
    """org-1, holding the role the shared containers below name."""
    return role_caller(keys, "org-1", "dave", "support")


def principal(caller: Any) -> Principal:
    return Principal(caller.organization_id, caller.user_id)


async def backdate(api, caller, cid: str, memory_type: str, memory_id: str, **times: int) -> None:  # type: ignore[no-untyped-def]
    """Set a stored doc's times (the API never lets a caller write them)."""
    store = api.app[AGENTIC].store
    owner = principal(caller)
    stored = await store.get(owner, cid, memory_type, memory_id)
    assert stored is not None
    assert await store.replace(owner, cid, memory_type, memory_id, {**stored.source, **times}) is not None


async def ids(api, caller, cid: str, memory_type: str) -> set[str]:  # type: ignore[no-untyped-def]
    body = {"query": {"match_all": {}}, "size": 1000}
    found = await call(api, caller, "POST", f"/{cid}/memories/{memory_type}/_search", body)
    return {hit["_id"] for hit in found["hits"]["hits"]}


async def session_with(api, caller, cid: str, session_id: str, messages: int = 1) -> list[str]:  # type: ignore[no-untyped-def]
    """A session (created by its first add) and the ids of its working memories."""
    working = []
    for n in range(messages):
        body = {"messages": conversation(f"{session_id} {n}"), "namespace": {"session_id": session_id}}
        working.append((await call(api, caller, "POST", f"/{cid}/memories", body))["working_memory_id"])
    return working


def retention(api):  # type: ignore[no-untyped-def]
    return api.app[AGENTIC].retention.retention


async def dry_run(api, caller, cid: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return await call(api, caller, "POST", f"/{cid}/_retention/_dry_run")


async def execute(api, caller) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return await call(api, caller, "POST", "/_retention/_execute")


TRIGGERED = {
    "acknowledged": True,
    "triggered": True,
    "status": "triggered",
    "message": "Memory retention job triggered. Deletions run asynchronously per configured retention policy.",
}

# -- the policy as ml-commons parses it -------------------------------------------------------------

POLICY_ERRORS = [
    (
        {"working": {"max_count": 1}},
        "Working memory retention cannot be configured directly. Working memory is deleted when its parent "
        'session expires. To control message lifetime, configure retention on "sessions" instead.',
        "illegal_argument_exception",
    ),
    ({"WORKING": {"max_count": 1}}, "Working memory retention cannot be configured directly.", None),
    ({"facts": {"max_count": 1}}, "unknown memory type: facts", "illegal_argument_exception"),
    ({"history": {"retention_days": 3}}, "retention_days is not supported for history memory type", None),
    ({"sessions": {"retention_days": 0}}, "retention_days must be a positive integer or null", None),
    ({"long-term": {"max_count": -2}}, "max_count must be a positive integer or null", None),
    (
        "30d",
        "Failed to parse object: expecting token of type [START_OBJECT] but found [VALUE_STRING]",
        "parsing_exception",
    ),
    (
        {"sessions": 5},
        "Failed to parse object: expecting token of type [START_OBJECT] but found [VALUE_NUMBER]",
        "parsing_exception",
    ),
    ({"sessions": {"max_count": "many"}}, "[max_count] must be an integer", "x_content_parse_exception"),
]


@pytest.mark.parametrize("policy,reason,type_", POLICY_ERRORS)
async def test_a_bad_retention_policy_is_a_400_in_ml_commons_words(api, alice, policy, reason, type_):
    body = {"name": "a", "configuration": {"retention_policy": policy}}
    payload = await call(api, alice, "POST", "/_create", body, 400)
    assert payload["error"]["reason"].startswith(reason), payload
    if type_:
        assert payload["error"]["type"] == type_
    cid = await container(api, alice)
    payload = await call(api, alice, "PUT", f"/{cid}", {"configuration": {"retention_policy": policy}}, 400)
    assert payload["error"]["reason"].startswith(reason), payload


async def test_a_policy_is_stored_normalised_merged_per_field_and_cleared_by_null(api, alice):
    policy = {"SESSIONS": {"retention_days": "30", "max_count": 5, "other": 1}, "history": {"max_count": 9}}
    cid = await container(api, alice, {"retention_policy": policy})
    config = (await call(api, alice, "GET", f"/{cid}"))["configuration"]
    assert config["retention_policy"] == {
        "sessions": {"retention_days": 30, "max_count": 5},
        "history": {"max_count": 9},
    }
    update = {"sessions": {"max_count": None}, "long-term": {"retention_days": 7}}
    await call(api, alice, "PUT", f"/{cid}", {"configuration": {"retention_policy": update}})
    config = (await call(api, alice, "GET", f"/{cid}"))["configuration"]
    assert config["retention_policy"] == {
        "sessions": {"retention_days": 30},
        "long-term": {"retention_days": 7},
        "history": {"max_count": 9},
    }
    await call(api, alice, "PUT", f"/{cid}", {"configuration": {"retention_policy": None}})
    assert (await call(api, alice, "GET", f"/{cid}"))["configuration"]["retention_policy"] is None
    assert (await dry_run(api, alice, cid))["policy_source"] == "none"


async def test_pinned_is_for_sessions_and_long_term_only(api, alice):
    cid = await container(api, alice)
    [wid] = await session_with(api, alice, cid, "s")
    pinned_working = (
        "pinned field is not supported for working memory type. To preserve a conversation, pin the session instead."
    )
    await error(api, alice, "PUT", f"/{cid}/memories/working/{wid}", {"pinned": True}, 400, pinned_working)
    body = {"messages": conversation("x"), "pinned": False}
    await error(api, alice, "POST", f"/{cid}/memories", body, 400, pinned_working, "status_exception")
    await call(api, alice, "PUT", f"/{cid}/memories/sessions/s", {"pinned": True})
    assert (await call(api, alice, "GET", f"/{cid}/memories/sessions/s"))["pinned"] is True
    await call(api, alice, "PUT", f"/{cid}/memories/sessions/s", {"pinned": None})
    assert "pinned" not in await call(api, alice, "GET", f"/{cid}/memories/sessions/s")


# -- custom container ids (3.9) ---------------------------------------------------------------------

ID_ERRORS = [
    ("", "memory container id is invalid"),
    ("   ", "memory container id is invalid"),
    ("_retention", "memory container id must not start with '_'"),
    ("-x", "memory container id must not start with '-'"),
    ("x" * 513, "memory container id is too long, max length is 512"),
    (
        "a b",
        "memory container id must contain only letters, digits, underscores, and hyphens, and must start with a "
        "letter or digit",
    ),
    ("ü", "memory container id must contain only letters"),
    # Java's isBlank is false for the no-break spaces (and U+0085): they fail the pattern, not the blank check
    ("\u00a0", "memory container id must contain only letters"),
    ("\u2007\u202f\x85", "memory container id must contain only letters"),
    ("\t\u2003\x1f", "memory container id is invalid"),
    ("a/b", "memory container id must contain only letters"),
]


@pytest.mark.parametrize("custom,reason", ID_ERRORS)
async def test_a_bad_custom_container_id_is_a_400(api, alice, custom, reason):
    body = {"name": "a", "memory_container_id": custom}
    await error(api, alice, "POST", "/_create", body, 400, reason, "illegal_argument_exception")
    assert (await call(api, alice, "POST", "/_search", {"query": {"match_all": {}}}))["hits"]["total"]["value"] == 0


async def test_a_custom_container_id_is_used_once_whoever_asks(api, alice, carol):
    created = await call(api, alice, "POST", "/_create", {"name": "a", "memory_container_id": "Team_a-1"})
    assert created == {"memory_container_id": "Team_a-1", "status": "created"}
    assert (await call(api, alice, "GET", "/Team_a-1"))["name"] == "a"
    for caller in (alice, carol):
        await error(
            api,
            caller,
            "POST",
            "/_create",
            {"name": "b", "memory_container_id": "Team_a-1"},
            409,
            "memory container id 'Team_a-1' already exists",
            "status_exception",
        )
    assert (await call(api, alice, "GET", "/Team_a-1"))["name"] == "a"
    await call(api, carol, "GET", "/Team_a-1", status=404)
    assert (await call(api, alice, "POST", "/_create", {"name": "n", "memory_container_id": 42}))[
        "memory_container_id"
    ] == "42"
    await call(api, alice, "POST", "/Team_a-1/memories", {"messages": conversation("hi")})


# -- dry-run and execute ----------------------------------------------------------------------------


async def test_max_count_keeps_the_newest_and_pinned_sessions_and_dry_run_counts_what_execute_deletes(api, alice):
    cid = await container(api, alice, {"retention_policy": {"sessions": {"max_count": 2}}})
    now = now_millis()
    working = {}
    for age, sid in enumerate(["e", "d", "c", "b", "a"], start=1):  # a is the least recently updated
        working[sid] = await session_with(api, alice, cid, sid, messages=2)
        await backdate(api, alice, cid, "sessions", sid, last_updated_time=now - age * DAY_MILLIS)
    await call(api, alice, "PUT", f"/{cid}/memories/sessions/b", {"pinned": True})
    report = await dry_run(api, alice, cid)
    assert report["container_id"] == cid and report["policy_source"] == "stored"
    assert report["effective_policy"] == {"sessions": {"max_count": 2}}
    assert report["would_delete"] == {
        "sessions": {"total": 2, "by_reason": {"retention_days": 0, "max_count": 2}},
        "long_term": {"total": 0, "by_reason": {}},
        "history": {"total": 0, "by_reason": {}},
        "working_memory": {"total": 4, "by_reason": {"cascade": 4, "ttl": 0, "orphan": 0}},
    }
    assert report["total_would_delete"] == 6 and report["pinned_would_skip"] == 0 and report["warnings"] == []
    before = {kind: await ids(api, alice, cid, kind) for kind in ("sessions", "working")}
    assert await execute(api, alice) == TRIGGERED
    assert await ids(api, alice, cid, "sessions") == {"b", "d", "e"}
    kept = {wid for sid in "bde" for wid in working[sid]}
    assert await ids(api, alice, cid, "working") == kept
    assert len(before["sessions"]) - 3 == report["would_delete"]["sessions"]["total"]
    assert len(before["working"]) - len(kept) == report["would_delete"]["working_memory"]["total"]
    assert (await dry_run(api, alice, cid))["total_would_delete"] == 0


async def test_retention_days_deletes_only_what_is_older_than_the_cutoff(api, alice):
    cid = await container(api, alice, {"retention_policy": {"sessions": {"retention_days": 1}}})
    await session_with(api, alice, cid, "x")
    await session_with(api, alice, cid, "y")
    [pinned_message] = await session_with(api, alice, cid, "z")
    t0 = now_millis() - DAY_MILLIS
    await backdate(api, alice, cid, "sessions", "x", last_updated_time=t0)
    await backdate(api, alice, cid, "sessions", "y", last_updated_time=t0 + 1)
    await backdate(api, alice, cid, "sessions", "z", last_updated_time=t0 - 30 * DAY_MILLIS)
    await call(api, alice, "PUT", f"/{cid}/memories/sessions/z", {"pinned": True})
    retention(api).clock = lambda: t0 + DAY_MILLIS  # the cutoff is x's time exactly: x is kept
    report = await dry_run(api, alice, cid)
    assert report["would_delete"]["sessions"] == {"total": 0, "by_reason": {"retention_days": 0, "max_count": 0}}
    assert report["pinned_would_skip"] == 1
    await execute(api, alice)
    assert await ids(api, alice, cid, "sessions") == {"x", "y", "z"}
    retention(api).clock = lambda: t0 + DAY_MILLIS + 1  # one millisecond on, x is older than the cutoff
    report = await dry_run(api, alice, cid)
    assert report["would_delete"]["sessions"]["by_reason"] == {"retention_days": 1, "max_count": 0}
    assert report["would_delete"]["working_memory"]["by_reason"]["cascade"] == 1
    await execute(api, alice)
    assert await ids(api, alice, cid, "sessions") == {"y", "z"}
    assert pinned_message in await ids(api, alice, cid, "working")


@pytest.mark.model  # the built-in embedding model's dimension, which SEMANTIC_CONFIG names
async def test_long_term_and_history_max_count_keep_the_newest_and_the_pinned(api, alice, llm: ScriptedLLM):
    policy = {"long-term": {"max_count": 2, "retention_days": 10}, "history": {"max_count": 3}}
    cid = await container(api, alice, {**SEMANTIC_CONFIG, "retention_policy": policy})
    await seed_long_term(api, alice, cid, llm, ["f0", "f1", "f2", "f3", "f4"])
    facts = await call(api, alice, "POST", f"/{cid}/memories/long-term/_search", {"query": {"match_all": {}}})
    by_text = {hit["_source"]["memory"]: hit["_id"] for hit in facts["hits"]["hits"]}
    now = now_millis()
    for n, text in enumerate(["f0", "f1", "f2", "f3", "f4"]):
        await backdate(api, alice, cid, "long-term", by_text[text], last_updated_time=now - (5 - n) * DAY_MILLIS)
    await backdate(api, alice, cid, "long-term", by_text["f0"], last_updated_time=now - 40 * DAY_MILLIS)
    await call(api, alice, "PUT", f"/{cid}/memories/long-term/{by_text['f0']}", {"pinned": True})
    history = sorted(await ids(api, alice, cid, "history"))
    assert len(history) == 5
    for n, hid in enumerate(history):
        await backdate(api, alice, cid, "history", hid, created_time=now - (10 - n) * DAY_MILLIS)
    report = await dry_run(api, alice, cid)
    assert report["would_delete"]["long_term"] == {"total": 2, "by_reason": {"retention_days": 0, "max_count": 2}}
    assert report["would_delete"]["history"] == {"total": 2, "by_reason": {"retention_days": 0, "max_count": 2}}
    assert report["pinned_would_skip"] == 1  # f0 is 40 days old: only its pin keeps it
    assert report["effective_policy"] == {"long_term": policy["long-term"], "history": policy["history"]}
    await execute(api, alice)
    assert await ids(api, alice, cid, "long-term") == {by_text[text] for text in ("f0", "f3", "f4")}
    assert await ids(api, alice, cid, "history") == set(history[2:])


async def test_working_memory_ttl_in_a_session_less_container(api, alice):
    retention(api).defaults = RetentionDefaults(working_memory_ttl_days=2)
    cid = await container(api, alice, {"disable_session": True})
    old = (await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation("old")}))["working_memory_id"]
    new = (await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation("new")}))["working_memory_id"]
    await backdate(api, alice, cid, "working", old, created_time=now_millis() - 2 * DAY_MILLIS - 1000)
    report = await dry_run(api, alice, cid)
    assert report["effective_policy"] == {"working_memory_ttl_days": 2}
    assert report["would_delete"]["working_memory"] == {"total": 1, "by_reason": {"cascade": 0, "ttl": 1, "orphan": 0}}
    await execute(api, alice)
    assert await ids(api, alice, cid, "working") == {new}


async def test_cluster_defaults_apply_unless_a_container_opts_out(api, alice):
    older = await container(api, alice)
    await session_with(api, alice, older, "s")
    defaults = RetentionDefaults(session_max_count=1, history_max_count=50)
    retention(api).defaults = api.app[AGENTIC].containers.retention_defaults = defaults
    cid = await container(api, alice)
    assert (await call(api, alice, "GET", f"/{cid}"))["configuration"]["retention_policy"] == {
        "sessions": {"max_count": 1},
        "history": {"max_count": 50},
    }
    opted_out = await container(api, alice, {"retention_policy": None})
    assert (await call(api, alice, "GET", f"/{opted_out}"))["configuration"]["retention_policy"] is None
    await session_with(api, alice, opted_out, "a")
    await session_with(api, alice, opted_out, "b")
    report = await dry_run(api, alice, older)
    assert report["policy_source"] == "default" and report["effective_policy"]["sessions"] == {"max_count": 1}
    assert (await dry_run(api, alice, cid))["policy_source"] == "stored"
    report = await dry_run(api, alice, opted_out)
    assert report["policy_source"] == "none" and report["effective_policy"] == {}
    assert report["warnings"] == [
        "container has no retention policy and no cluster defaults apply; nothing would be deleted"
    ]
    await execute(api, alice)
    assert await ids(api, alice, opted_out, "sessions") == {"a", "b"}


async def test_a_caller_only_sweeps_and_previews_what_it_may_see(api, alice, bob, carol):
    policy = {"retention_policy": {"sessions": {"max_count": 1}}}
    mine, theirs = await container(api, alice, policy), await container(api, bob, policy)
    for caller, cid in ((alice, mine), (bob, theirs)):  # session ids of their own (OpenSearch keeps one per index)
        await session_with(api, caller, cid, f"old-{caller.user_id}")
        await backdate(
            api, caller, cid, "sessions", f"old-{caller.user_id}", last_updated_time=now_millis() - DAY_MILLIS
        )
        await session_with(api, caller, cid, f"new-{caller.user_id}")
    for caller in (bob, carol):
        await error(
            api,
            caller,
            "POST",
            f"/{mine}/_retention/_dry_run",
            None,
            404,
            f"Failed to find memory container with the provided memory container id: {mine}",
        )
    everywhere = await call(api, bob, "POST", "/_retention/_dry_run")
    assert everywhere["skipped_count"] == 0 and everywhere["truncated"] is False
    assert [result["container_id"] for result in everywhere["results"]] == [theirs]
    assert (await call(api, carol, "POST", "/_retention/_dry_run"))["results"] == []
    assert await execute(api, bob) == TRIGGERED
    assert await ids(api, bob, theirs, "sessions") == {"new-bob"}
    assert await ids(api, alice, mine, "sessions") == {"old-alice", "new-alice"}


async def test_execute_takes_no_body_and_says_when_retention_is_off(api, alice):
    await error(
        api,
        alice,
        "POST",
        "/_retention/_execute",
        {"memory_container_id": "x"},
        400,
        "_execute does not accept a request body; it always runs cluster-wide.",
        "status_exception",
    )
    retention(api).enabled = False
    assert await execute(api, alice) == {
        "acknowledged": False,
        "triggered": False,
        "status": "retention_disabled",
        "message": "Memory retention is disabled (plugins.ml_commons.memory.retention_enabled=false); "
        "nothing was triggered.",
    }
    cid = await container(api, alice)
    report = await dry_run(api, alice, cid)
    assert report["total_would_delete"] == 0
    assert report["warnings"][0].startswith("retention is disabled cluster-wide")


async def test_the_background_sweep_applies_every_owners_policy(api, alice, carol):
    sweeper = api.app[AGENTIC].retention
    await sweeper.stop()
    sweeper.interval = 0.05
    sweeper.start()
    policy = {"retention_policy": {"sessions": {"retention_days": 1}}}
    containers = {caller.user_id: (caller, await container(api, caller, policy)) for caller in (alice, carol)}
    for caller, cid in containers.values():
        await session_with(api, caller, cid, f"old-{caller.user_id}")
        old = now_millis() - 2 * DAY_MILLIS
        await backdate(api, caller, cid, "sessions", f"old-{caller.user_id}", last_updated_time=old)
    for caller, cid in containers.values():

        async def swept(caller=caller, cid=cid) -> bool:
            return not await ids(api, caller, cid, "sessions")

        await eventually(swept, f"the sweep deletes {caller.user_id}'s old session")


async def test_a_doc_changed_since_the_sweep_read_it_is_kept(api, alice):
    """The conditional delete itself: a snapshot older than the doc deletes nothing; the current one deletes."""
    service = api.app[AGENTIC]
    store, owner = service.retention.store, service.store
    cid = await container(api, alice)
    await session_with(api, alice, cid, "s")
    me = principal(alice)
    org = me.organization_id
    [before] = await store.snapshot(org, cid, "sessions")
    await session_with(api, alice, cid, "s")  # touches the session
    assert await store.delete_unchanged(org, cid, "sessions", [before]) == []
    assert await owner.get(me, cid, "sessions", "s") is not None
    [current] = await store.snapshot(org, cid, "sessions")
    assert await store.delete_unchanged(org, cid, "sessions", [current, current]) == ["s"]
    assert await store.delete_unchanged(org, cid, "sessions", [current]) == []  # idempotent


async def test_a_session_touched_between_evaluation_and_delete_keeps_itself_and_its_messages(api, alice):
    cid = await container(api, alice, {"retention_policy": {"sessions": {"retention_days": 1}}})
    first = await session_with(api, alice, cid, "s", messages=2)
    await backdate(api, alice, cid, "sessions", "s", last_updated_time=now_millis() - 2 * DAY_MILLIS)
    owner, engine = principal(alice), retention(api)
    stored = await api.app[AGENTIC].store.get_container(owner, cid)
    plan = await engine.evaluate(owner, stored)
    assert plan_view(plan)["would_delete"]["working_memory"]["by_reason"]["cascade"] == 2
    later = await session_with(api, alice, cid, "s")  # an add touches the session after the evaluation
    assert (await engine.apply(owner, plan)).total == 0
    assert await ids(api, alice, cid, "sessions") == {"s"}
    assert await ids(api, alice, cid, "working") == {*first, *later}
    plan = await engine.evaluate(owner, stored)  # evaluated afresh, the session is recent: nothing goes
    assert plan_view(plan)["total_would_delete"] == 0


# -- a run covers every document of a container, whoever wrote it (ml-commons filters by container and pinned)


async def shared_with_old_sessions(api, alice, dave) -> str:  # type: ignore[no-untyped-def]
    """alice's container shared with dave's role, each with an expired session of two messages and a fresh one."""
    policy = {"retention_policy": {"sessions": {"retention_days": 1}}}
    shared = await container(api, alice, policy, backend_roles=["support"])
    old = now_millis() - 2 * DAY_MILLIS
    for caller in (alice, dave):
        await session_with(api, caller, shared, f"old-{caller.user_id}", messages=2)
        await backdate(api, caller, shared, "sessions", f"old-{caller.user_id}", last_updated_time=old)
        await session_with(api, caller, shared, f"new-{caller.user_id}")
    return shared


async def test_the_owners_execute_takes_every_writers_expired_sessions_in_a_shared_container(api, alice, dave):
    shared = await shared_with_old_sessions(api, alice, dave)
    for caller in (alice, dave):  # the owner and the role holder are told the same
        report = await dry_run(api, caller, shared)
        assert report["would_delete"]["sessions"]["total"] == 2, report
        assert report["would_delete"]["working_memory"]["by_reason"]["cascade"] == 4, report
    assert await execute(api, alice) == TRIGGERED
    assert await ids(api, alice, shared, "sessions") == {"new-alice"}
    assert await ids(api, dave, shared, "sessions") == {"new-dave"}
    assert len(await ids(api, alice, shared, "working")) == len(await ids(api, dave, shared, "working")) == 1


async def test_the_background_sweep_takes_every_writers_expired_sessions_in_a_shared_container(api, alice, dave):
    shared = await shared_with_old_sessions(api, alice, dave)
    totals = await api.app[AGENTIC].retention.sweep()  # one run of the background loop, which runs as no one
    assert totals == {"sessions": 2, "working": 4, "long-term": 0, "history": 0}
    assert await ids(api, alice, shared, "sessions") == {"new-alice"}
    assert await ids(api, dave, shared, "sessions") == {"new-dave"}


async def test_the_organisation_key_previews_and_sweeps_its_users_containers(api, alice, admin, carol):
    policy = {"retention_policy": {"sessions": {"max_count": 1}}}
    alices, carols = await container(api, alice, policy), await container(api, carol, policy)
    for caller, cid in ((alice, alices), (carol, carols)):
        await session_with(api, caller, cid, f"old-{caller.user_id}")
        await backdate(api, caller, cid, "sessions", f"old-{caller.user_id}", last_updated_time=now_millis() - 1000)
        await session_with(api, caller, cid, f"new-{caller.user_id}")
    report = await dry_run(api, admin, alices)
    assert report["would_delete"]["sessions"] == {"total": 1, "by_reason": {"retention_days": 0, "max_count": 1}}
    everywhere = await call(api, admin, "POST", "/_retention/_dry_run")
    assert [result["container_id"] for result in everywhere["results"]] == [alices]  # its organisation's only
    assert everywhere["results"][0]["total_would_delete"] == 2  # the session and its message
    assert await execute(api, admin) == TRIGGERED
    assert await ids(api, alice, alices, "sessions") == {"new-alice"}
    assert await ids(api, carol, carols, "sessions") == {"old-carol", "new-carol"}  # another organisation


@pytest.mark.backends("opensearch")
async def test_the_retention_suite_really_runs_on_opensearch(api, alice):  # type: ignore[no-untyped-def]
    from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore
    from memory_plugin.agentic.stores.retention_opensearch import OpenSearchRetention

    service = api.app[AGENTIC]
    assert isinstance(service.store, OpenSearchAgenticStore)
    assert isinstance(service.retention.store, OpenSearchRetention)
    cid = await container(api, alice, {"retention_policy": {"sessions": {"max_count": 1}}})
    await session_with(api, alice, cid, "s")
    assert [doc.id for _, doc in await service.retention.store.every_container()] == [cid]
