"""The retention sweep under a running load loses nothing it should keep (issue 27's acceptance).

Writers add messages to their sessions, to old sessions they revive, and to a
session-less container, while sweeps (the background run and on-demand
executes) delete what the policies say.  Afterwards every acknowledged write
that the policy keeps is there: the writers' sessions and every message in
them, every message added to a revived session, the pinned sessions with their
messages, the fresh session-less messages; and what the policy drops is gone.
Runs on both backends (``backend``: embedded, and OpenSearch in the full suite).
"""

from __future__ import annotations

import asyncio

import pytest

from memory_plugin.agentic.models import now_millis
from memory_plugin.agentic.retention import DAY_MILLIS
from memory_plugin.agentic.retention_settings import RetentionDefaults
from memory_plugin.agentic.routes import AGENTIC
from tests.http.test_agentic import call, container, conversation
from tests.http.test_agentic_retention import api, backdate, execute, ids, retention, session_with  # noqa: F401

pytestmark = pytest.mark.backends("embedded", "opensearch")

WRITERS, ADDS, MAX_SESSIONS = 4, 12, 12


async def test_the_retention_sweep_under_a_running_load_loses_nothing_it_should_keep(api, alice):  # noqa: F811
    retention(api).defaults = RetentionDefaults(working_memory_ttl_days=1)
    policy = {"retention_policy": {"sessions": {"retention_days": 1, "max_count": MAX_SESSIONS}}}
    cid = await container(api, alice, policy)
    sessionless = await container(api, alice, {"disable_session": True})
    old_time = now_millis() - 3 * DAY_MILLIS
    doomed, pinned, revived = [f"old-{n}" for n in range(6)], ["pin-0", "pin-1"], ["rev-0", "rev-1"]
    kept_messages: set[str] = set()
    doomed_messages: set[str] = set()
    for sid in doomed + pinned + revived:
        messages = await session_with(api, alice, cid, sid, messages=2)
        await backdate(api, alice, cid, "sessions", sid, last_updated_time=old_time)
        if sid in pinned:
            kept_messages.update(messages)
        elif sid in doomed:  # a revived session's first messages go or stay, as the race between them falls
            doomed_messages.update(messages)
    for sid in pinned:
        await call(api, alice, "PUT", f"/{cid}/memories/sessions/{sid}", {"pinned": True})
    stale = []
    for n in range(5):
        body = {"messages": conversation(f"stale {n}")}
        stale.append((await call(api, alice, "POST", f"/{sessionless}/memories", body))["working_memory_id"])
        await backdate(api, alice, sessionless, "working", stale[-1], created_time=old_time)

    done = asyncio.Event()
    sweeps = {"background": 0, "execute": 0}

    async def writer(n: int) -> None:
        for i in range(ADDS):
            target = revived[n % len(revived)] if i == ADDS // 2 else f"live-{n}"
            body = {"messages": conversation(f"{target} {i}"), "namespace": {"session_id": target}}
            kept_messages.add((await call(api, alice, "POST", f"/{cid}/memories", body))["working_memory_id"])
            body = {"messages": conversation(f"fresh {n} {i}")}
            answer = await call(api, alice, "POST", f"/{sessionless}/memories", body)
            kept_messages.add(answer["working_memory_id"])

    async def sweeper() -> None:
        service = api.app[AGENTIC].retention
        while not done.is_set():
            if await service.sweep() is not None:
                sweeps["background"] += 1
            await asyncio.sleep(0)

    async def executor() -> None:
        while not done.is_set():
            if (await execute(api, alice))["status"] == "triggered":
                sweeps["execute"] += 1
            await asyncio.sleep(0.01)

    sweeping = [asyncio.create_task(sweeper()), asyncio.create_task(executor())]
    try:
        await asyncio.wait_for(asyncio.gather(*(writer(n) for n in range(WRITERS))), timeout=300)
    finally:
        done.set()
        await asyncio.gather(*sweeping)
    assert sweeps["background"] + sweeps["execute"] >= 2, sweeps  # the sweeps really ran among the writes
    await execute(api, alice)  # and once more after them: whatever is left is what the policy keeps

    sessions = await ids(api, alice, cid, "sessions")
    working = await ids(api, alice, cid, "working") | await ids(api, alice, sessionless, "working")
    assert kept_messages <= working, sorted(kept_messages - working)
    assert {f"live-{n}" for n in range(WRITERS)} | set(pinned) | set(revived) == sessions
    assert not doomed_messages & working
    assert not set(stale) & working
    assert len(sessions - set(pinned)) <= MAX_SESSIONS
