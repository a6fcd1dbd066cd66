"""Several server processes over one OpenSearch cluster: the outbox and the agentic queues are claimed with leases.

Each "process" here is a whole application (``create_app``) with its own clients, stores, bridge and
workers, over the same index prefix, as two ``memory-plugin serve`` would be.  A third, bare store
plays the process that takes a lease and dies.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from memory_plugin.agentic.infer import job_ids
from memory_plugin.agentic.models import EmbeddingChoice
from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.agentic.stores.base import InferJob, LongTermChange
from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore
from memory_plugin.app import BRIDGE, create_app
from memory_plugin.memory.stores.opensearch import OpenSearchMemoryStore
from memory_plugin.settings import OpenSearchRegion
from tests.http.test_agentic import SEMANTIC_CONFIG, call, container, conversation
from tests.http.test_bridge_outbox import FlakyEmbedder, interaction, record_ids
from tests.http.test_bridge_outbox import conversation as memory_conversation
from tests.support.agentic_llm import ScriptedLLM, payload_of

pytestmark = [pytest.mark.opensearch, pytest.mark.model]


@pytest.fixture
def index_prefix(opensearch_nodes):  # type: ignore[no-untyped-def]
    prefix = f"mp-lease-{uuid.uuid4().hex[:12]}"
    yield prefix
    opensearch_nodes[0].request("DELETE", f"/{prefix}-*")


@pytest.fixture
def region(opensearch_nodes, index_prefix) -> OpenSearchRegion:  # type: ignore[no-untyped-def]
    return OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix)


@pytest.fixture
def shared_settings(settings, region, llm):  # type: ignore[no-untyped-def]
    return settings.replace(
        regions={"USA": region},
        home_region="USA",
        bridge={"enabled": True, "batch_size": 8, "retry_max_seconds": 0.2},
        agentic={"llm": {"url": str(llm.server.make_url("/v1/chat/completions")), "api_key": "sk-test"}},
    )


@pytest.fixture
async def two(aiohttp_client, shared_settings, embedder, alice, bob):  # type: ignore[no-untyped-def]
    """Two server processes over the same OpenSearch indices."""
    return [await aiohttp_client(create_app(shared_settings, embedder=embedder)) for _ in range(2)]


def count(node: Any, index: str, query: dict[str, Any] | None = None) -> int:
    node.request("POST", f"/{index}/_refresh")
    status, body = node.request("POST", f"/{index}/_count", {"query": query or {"match_all": {}}})
    assert status == 200, body
    return int(body["count"])


def sources(node: Any, index: str) -> dict[str, dict[str, Any]]:
    node.request("POST", f"/{index}/_refresh")
    status, body = node.request("POST", f"/{index}/_search", {"size": 1000, "query": {"match_all": {}}})
    assert status == 200, body
    return {hit["_id"]: hit["_source"] for hit in body["hits"]["hits"]}


async def settled(apis: list[Any]) -> None:
    for api in apis:  # each looks at the shared queues; twice, since one's work may wake the other's
        await api.app[AGENTIC].settled()
    for api in apis:
        await api.app[AGENTIC].settled()


def one_fact_each(llm: ScriptedLLM) -> None:
    """Each add's one message becomes one fact of its own: a job is one LLM call when its scope is new."""
    llm.facts = lambda kind, messages: [f"remembers {messages[0]['content'][0]['text']}"]


async def infer_add(api: Any, caller: Any, cid: str, text: str, user: str) -> None:
    # With a session id given, no LLM call titles a new session: the LLM is called by infer jobs only.  A session
    # of its own: concurrent adds to one session race on touching it (not what this module is about).
    namespace = {"user_id": user, "session_id": f"session-{user}"}
    body = {"messages": conversation(text), "namespace": namespace, "infer": True}
    await call(api, caller, "POST", f"/{cid}/memories", body)


# -- agentic infer jobs -------------------------------------------------------------------------


async def test_two_processes_run_every_infer_job_exactly_once(two, alice, llm, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    one_fact_each(llm)
    cid = await container(two[0], alice, SEMANTIC_CONFIG)
    # One add first: it creates the container's indices (a shard just created refuses writes for a moment).
    await infer_add(two[0], alice, cid, "warm-up", "user-w")
    await settled(two)
    node, root = opensearch_nodes[0], f"{index_prefix}-ml-am"
    warm_memories = set(sources(node, f"{root}-*-memory-long-term*"))
    warm_history = set(sources(node, f"{root}-*-memory-history"))
    llm.requests.clear()
    warm_runs = sum(api.app[AGENTIC].metrics.infer_runs.labels("applied")._value.get() for api in two)
    jobs = 12
    # Round-robin over both, each add in a scope of its own; both drain at once (woken, and polling).
    await asyncio.gather(*(infer_add(two[n % 2], alice, cid, f"note {n}", f"user-{n}") for n in range(jobs)))
    await settled(two)
    assert len(llm.requests) == jobs, "a job was run by both processes"
    memories = {k: v for k, v in sources(node, f"{root}-*-memory-long-term*").items() if k not in warm_memories}
    assert sorted(doc["memory"] for doc in memories.values()) == sorted(f"remembers note {n}" for n in range(jobs))
    history = {k: v for k, v in sources(node, f"{root}-*-memory-history").items() if k not in warm_history}
    assert len(history) == jobs and sorted(doc["memory_id"] for doc in history.values()) == sorted(memories)
    assert count(node, f"{root}-infer-jobs") == 0
    runs = sum(api.app[AGENTIC].metrics.infer_runs.labels("applied")._value.get() for api in two)
    assert runs - warm_runs == jobs


def extractions(llm: ScriptedLLM) -> Counter[str]:
    """The extraction calls the LLM saw, by the first message's text (the add's)."""
    return Counter(
        payload_of(body["messages"][1]["content"])[0]["content"][0]["text"]
        for body in llm.requests
        if "memory store" not in body["messages"][0]["content"]
    )


async def test_adds_into_new_containers_through_two_processes_call_the_llm_once_each(two, alice, llm):  # type: ignore[no-untyped-def]
    """Both processes run a job of a container of a new index prefix at once: one creates its long-term index
    while the other finds it existing, and must wait for its primaries before searching it (a 503 failed that
    run after its extraction, and the retry asked the LLM again).  Every add's extraction is asked once."""
    one_fact_each(llm)
    texts: list[str] = []
    for n in range(6):
        cid = await container(two[n % 2], alice, {**SEMANTIC_CONFIG, "index_prefix": f"fresh-{n}"})
        pair = [f"round {n} note {m}" for m in range(2)]
        texts += pair
        await asyncio.gather(*(infer_add(two[m], alice, cid, pair[m], f"user-{n}-{m}") for m in range(2)))
    await settled(two)
    assert extractions(llm) == Counter(texts)


async def test_a_job_whose_holder_died_is_finished_by_another_process(  # type: ignore[no-untyped-def]
    two, alice, llm, region, opensearch_nodes, index_prefix
):
    one_fact_each(llm)
    for api in two:  # nobody drains while the doomed process takes the job
        await api.app[AGENTIC].infer.stop()
    cid = await container(two[0], alice, SEMANTIC_CONFIG)
    await infer_add(two[0], alice, cid, "orphaned note", "user-x")
    doomed = OpenSearchAgenticStore(region, lease_seconds=1.0)
    await doomed.open(384)
    try:
        [job] = await doomed.claim_infer_jobs(8)
        for api in two:
            await api.app[AGENTIC].infer.start()
            assert await api.app[AGENTIC].store.claim_infer_jobs(8) == []  # held: nobody else takes it
        await settled(two)  # the lease runs out; a poll takes the job over
        root = f"{index_prefix}-ml-am"
        memories = sources(opensearch_nodes[0], f"{root}-*-memory-long-term*")
        assert [doc["memory"] for doc in memories.values()] == ["remembers orphaned note"]
        assert len(llm.requests) == 1
        # The dead holder wakes up: it can neither apply its run nor count an attempt.
        assert not await doomed.renew_infer_job(job)
        await doomed.apply_infer(job, [LongTermChange("ADD", "stale-add", doc={"memory": "stale"})], [])
        await doomed.count_infer_attempt(job)
        assert "stale-add" not in sources(opensearch_nodes[0], f"{root}-*-memory-long-term*")
    finally:
        await doomed.close()


async def test_a_stale_holder_cannot_finish_a_job_another_process_took_over(  # type: ignore[no-untyped-def]
    two, alice, llm, region, opensearch_nodes, index_prefix
):
    for api in two:
        await api.app[AGENTIC].infer.stop()
    cid = await container(two[0], alice, SEMANTIC_CONFIG)
    await infer_add(two[0], alice, cid, "contested note", "user-y")
    stale, fresh = (OpenSearchAgenticStore(region, lease_seconds=seconds) for seconds in (0.5, 60.0))
    await stale.open(384)
    await fresh.open(384)
    try:
        [job] = await stale.claim_infer_jobs(1)
        await asyncio.sleep(1.0)  # the lease runs out
        [taken] = await fresh.claim_infer_jobs(1)
        assert taken.job_id == job.job_id
        assert not await stale.renew_infer_job(job)
        await stale.count_infer_attempt(job)
        await stale.apply_infer(job, [], [])
        jobs = f"{index_prefix}-ml-am-infer-jobs"
        assert count(opensearch_nodes[0], jobs) == 1, "the stale holder dropped a job it no longer held"
        assert await fresh.infer_job_count() == await stale.infer_job_count() == 1  # held or not, it is queued
        [queued] = await fresh.infer_jobs(1)
        assert queued.attempts == 0
        await fresh.apply_infer(taken, [], [])
        assert count(opensearch_nodes[0], jobs) == 0 and await fresh.infer_job_count() == 0
    finally:
        await stale.close()
        await fresh.close()


async def test_applying_one_job_twice_leaves_the_same_documents(two, alice, llm, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    llm.facts = lambda kind, messages: ["likes tea", "lives in Lisbon"]
    service = two[0].app[AGENTIC]
    applied: list[tuple[InferJob, list[LongTermChange], list[tuple[str, dict[str, Any]]]]] = []
    apply = service.store.apply_infer

    async def recorded(job: InferJob, changes: Any, history: Any) -> None:
        applied.append((job, list(changes), list(history)))
        await apply(job, changes, history)

    service.store.apply_infer = recorded
    await two[1].app[AGENTIC].infer.stop()
    cid = await container(two[0], alice, SEMANTIC_CONFIG)
    await infer_add(two[0], alice, cid, "tea in Lisbon", "user-z")
    await settled(two)
    [(job, changes, history)] = applied
    next_id = job_ids(job)
    assert [change.memory_id for change in changes] == [next_id(), next_id()], "ADD ids are not derived from the job"
    node, root = opensearch_nodes[0], f"{index_prefix}-ml-am"
    before = {kind: sources(node, f"{root}-*-memory-{kind}") for kind in ("long-term", "history")}
    assert len(before["long-term"]) == 2 and len(before["history"]) == 2
    # Redelivered: the job is queued again (its first holder's delete was lost), and applied again.
    source = {
        "memory_container_id": cid,
        "tenant_id": "org-1",
        "owner_id": "alice",
        "created_time": 0,
        "attempts": 0,
        "request": job.request,
    }
    status, body = node.request("PUT", f"/{root}-infer-jobs/_doc/{job.job_id}?refresh=true", source)
    assert status == 201, body
    await apply(InferJob(job.job_id, job.owner, job.container_id, job.request), changes, history)
    after = {kind: sources(node, f"{root}-*-memory-{kind}") for kind in ("long-term", "history")}
    assert after == before
    assert count(node, f"{root}-infer-jobs") == 0


async def test_pending_embeddings_are_claimed_by_one_process(two, alice, llm, region, opensearch_nodes):  # type: ignore[no-untyped-def]
    for api in two:
        await api.app[AGENTIC].embeddings.stop()
        await api.app[AGENTIC].infer.stop()
    one_fact_each(llm)
    cid = await container(two[0], alice, SEMANTIC_CONFIG)
    await infer_add(two[0], alice, cid, "embed me once", "user-e")
    await two[0].app[AGENTIC].infer.drain()  # applied: its memory is pending, and nobody embeds it
    first, second = (api.app[AGENTIC].store for api in two)
    claimed = await first.pending_embeddings(64)
    assert [entry.text for entry in claimed] == ["remembers embed me once"]
    assert await second.pending_embeddings(64) == [], "a claimed memory was handed to a second process"
    await first.release_embeddings(claimed)  # its model failed: anyone may take it at once
    [again] = await second.pending_embeddings(64)
    vector = await two[1].app[AGENTIC].models.passages(again.owner, EmbeddingChoice.of(SEMANTIC_CONFIG), [again.text])
    # Both embed it (the first's lease ran out, say): the memory's text is current for both, stored once.
    assert await second.store_embeddings([(again.key, again.text, vector[0])]) == 1
    assert await first.store_embeddings([(claimed[0].key, claimed[0].text, vector[0])]) == 0
    assert await first.pending_count() == 0


# -- the history bridge's outbox ------------------------------------------------------------------


@pytest.fixture
async def bridged(aiohttp_client, shared_settings, alice, carol):  # type: ignore[no-untyped-def]
    embedder = FlakyEmbedder.with_default_tokenizer()
    return [await aiohttp_client(create_app(shared_settings, embedder=embedder)) for _ in range(2)]


async def test_two_bridges_apply_every_outbox_entry_exactly_once(bridged, alice, carol, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    for api in bridged:
        await api.app[BRIDGE].stop()
    written: dict[str, str] = {}
    for n, caller in enumerate([alice, carol, alice]):
        conversation_id = await memory_conversation(bridged[n % 2], caller)
        for m in range(20):
            text = f"ledger entry {n}x{m}"
            written[await interaction(bridged[m % 2], caller, conversation_id, text)] = text
    node = opensearch_nodes[0]
    for api in bridged:  # both drain the same backlog at once, eight entries a batch
        await api.app[BRIDGE].start()
    for api in bridged + bridged:
        await api.app[BRIDGE].settled()
    applied = sum(api.app[BRIDGE].metrics.done.labels("index", "applied")._value.get() for api in bridged)
    assert applied == len(written), "an entry was applied by both bridges"
    records = sources(node, f"{index_prefix}-ai_pipeline_storage")
    assert sorted(doc["record_id"] for doc in records.values()) == sorted(written), "a record is missing or doubled"
    assert await record_ids(bridged[1], carol, "ledger entry") == sorted(i for i in written if "1x" in written[i])


async def test_outbox_entries_of_a_dead_holder_are_finished_by_another_process(bridged, alice, region):  # type: ignore[no-untyped-def]
    for api in bridged:
        await api.app[BRIDGE].stop()
    conversation_id = await memory_conversation(bridged[0], alice)
    ids = sorted([await interaction(bridged[0], alice, conversation_id, f"cashflow memo {n}") for n in range(3)])
    doomed = OpenSearchMemoryStore(region, outbox=True)
    await doomed.open()
    try:
        doomed._outbox_entries.lease_seconds = 1.0
        taken = await doomed.outbox_pending(64, time.time())
        assert len(taken) == 3
        store = bridged[1].app[BRIDGE].store
        assert await store.outbox_pending(64, time.time()) == [], "entries another process holds were handed out"
        await bridged[1].app[BRIDGE].start()
        await bridged[1].app[BRIDGE].settled()  # the leases run out; the bridge's poll takes them over
        assert sorted(await record_ids(bridged[1], alice, "cashflow memo")) == ids
        # The dead holder wakes up: its retry and its done change nothing.
        await doomed.outbox_retry(taken, time.time() + 3600)
        await doomed.outbox_done(taken)
        assert (await store.outbox_lag()).backlog == 0
    finally:
        await doomed.close()


async def test_a_stale_outbox_holder_cannot_finish_entries_taken_over(bridged, alice, region):  # type: ignore[no-untyped-def]
    for api in bridged:
        await api.app[BRIDGE].stop()
    conversation_id = await memory_conversation(bridged[0], alice)
    await interaction(bridged[0], alice, conversation_id, "disputed charge")
    stale, fresh = OpenSearchMemoryStore(region, outbox=True), OpenSearchMemoryStore(region, outbox=True)
    await stale.open()
    await fresh.open()
    try:
        stale._outbox_entries.lease_seconds = 0.5
        [entry] = await stale.outbox_pending(64, time.time())
        await asyncio.sleep(1.0)
        [taken] = await fresh.outbox_pending(64, time.time())
        assert taken.entry_id == entry.entry_id
        await stale.outbox_done([entry])
        await stale.outbox_retry([entry], time.time() + 3600)
        assert (await fresh.outbox_lag()).backlog == 1, "the stale holder dropped an entry it no longer held"
        await fresh.outbox_done([taken])
        assert (await fresh.outbox_lag()).backlog == 0
    finally:
        await stale.close()
        await fresh.close()
