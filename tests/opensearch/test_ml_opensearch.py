"""Connectors, models and predict with the home region on a real OpenSearch cluster (2.19.1).

The whole ML HTTP suite (``tests/http/test_ml.py``) runs on OpenSearch as its ``opensearch``
backend (the home region on a real node).  Here, what only a shared cluster shows: two stores (two processes) agree on one master key, a create never overwrites,
and of two writers at one version exactly one wins.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from memory_plugin.app import create_app
from memory_plugin.auth import Principal
from memory_plugin.ml.budget import Throttled
from memory_plugin.ml.stores.base import StoreConflict
from memory_plugin.ml.stores.opensearch import OpenSearchMLStore
from memory_plugin.ml.stores.opensearch_budget import SharedCallBudget
from memory_plugin.settings import OpenSearchRegion
from tests.http.test_agentic_models import ML, registered_llm
from tests.http.test_ml import LOOPBACK
from tests.support.agentic_llm import ScriptedLLM
from tests.support.polling import PATIENCE

pytestmark = [pytest.mark.opensearch, pytest.mark.backends("opensearch")]


@pytest.fixture
def index_prefix(opensearch_nodes):  # type: ignore[no-untyped-def]
    prefix = f"mp-ml-{uuid.uuid4().hex[:12]}"
    yield prefix
    opensearch_nodes[0].request("DELETE", f"/{prefix}-*")


async def test_processes_share_one_master_key_and_decide_writes_in_opensearch(opensearch_nodes, index_prefix):
    region = OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix, timeout=PATIENCE)
    first, second = OpenSearchMLStore(region), OpenSearchMLStore(region)
    await asyncio.gather(first.open(), second.open())
    try:
        keys = await asyncio.gather(first.master_key(b"a" * 32), second.master_key(b"b" * 32))
        assert keys[0] == keys[1] and keys[0] in (b"a" * 32, b"b" * 32)
        owner, stranger = Principal("org", "u"), Principal("org", "v")
        await first.create("model", owner, "m1", {"n": 0})
        with pytest.raises(StoreConflict):
            await second.create("model", owner, "m1", {"n": 99})
        read = await second.get("model", owner, "m1")
        assert read is not None and read.source == {"n": 0}
        assert await first.get("model", stranger, "m1") is None
        assert not await first.delete("model", stranger, "m1")
        wins = await asyncio.gather(*(s.replace("model", owner, read, {"n": i}) for i, s in enumerate((first, second))))
        assert sorted(wins) == [False, True]
        after = await first.get("model", owner, "m1")
        assert after is not None and after.source == {"n": wins.index(True)}
        assert [d.id for d in await second.all("model", owner)] == ["m1"] and await second.all("model", stranger) == []
        assert await first.erase(owner) == 1 and await second.get("model", owner, "m1") is None
    finally:
        await asyncio.gather(first.close(), second.close())


async def test_documents_list_in_write_order_after_merges_reorder_the_segments(opensearch_nodes, index_prefix):
    """Lucene merges the largest segments first: once merged, ``_doc`` order is no longer the writes' order."""
    store = OpenSearchMLStore(OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix))
    await store.open()
    try:
        owner = Principal("org", "u")
        written = [f"m{i:02}" for i in range(24)]
        for i, model_id in enumerate(written):  # each write refreshes: a segment each, each larger than the last
            await store.create("model", owner, model_id, {"pad": "x" * (1000 * (i + 1))})
        first = await store.get("model", owner, written[0])
        assert first is not None and await store.replace("model", owner, first, {"pad": "y"})
        assert opensearch_nodes[0].request("POST", f"/{store.index}/_forcemerge?max_num_segments=1")[0] == 200
        assert [d.id for d in await store.all("model", owner)] == [*written[1:], written[0]]
    finally:
        await store.close()


# -- the organisations' call budgets: counted in the cluster, for every process ---------------------


async def two_processes(aiohttp_client, settings, embedder, **limits: int) -> list[Any]:
    """Two server processes over the same indices (each its own app, store and client), with these ``[ml]`` limits."""
    limited = settings.replace(ml={"trusted_endpoints_regex": (LOOPBACK,), "allow_private_addresses": True, **limits})
    return [await aiohttp_client(create_app(limited, embedder=embedder)) for _ in range(2)]


async def test_an_organisation_gets_its_calls_a_minute_across_processes_not_twice_them(  # type: ignore[no-untyped-def]
    aiohttp_client, aiohttp_server, settings, embedder, alice, carol
):
    llm = ScriptedLLM()
    llm.raw_content = "fine"
    url = str((await aiohttp_server(llm.app())).make_url("")).rstrip("/")
    first, second = await two_processes(aiohttp_client, settings, embedder, org_calls_per_minute=3)
    model_id = await registered_llm(first, alice, url, "sk-alice")
    carols = await registered_llm(second, carol, url, "sk-carol")
    body = {"parameters": {"system_prompt": "s", "user_prompt": "u"}}
    path = f"{ML}/models/{model_id}/_predict"
    answers = [await api.post(path, json=body, headers=alice.headers) for api in (first, second) * 3]
    assert [a.status for a in answers] == [200, 200, 200, 429, 429, 429]
    assert "3 remote model calls a minute" in (await answers[-1].json())["error"]["reason"]
    assert len(llm.requests) == 3  # a refused call never reaches the remote model
    # another organisation's budget is its own
    assert (await first.post(f"{ML}/models/{carols}/_predict", json=body, headers=carol.headers)).status == 200


async def test_an_organisation_gets_its_concurrent_calls_across_processes_and_they_come_back(  # type: ignore[no-untyped-def]
    aiohttp_client, aiohttp_server, settings, embedder, alice
):
    llm = ScriptedLLM()
    llm.hang = {"SEMANTIC"}  # extraction prompts wait until released
    url = str((await aiohttp_server(llm.app())).make_url("")).rstrip("/")
    first, second = await two_processes(aiohttp_client, settings, embedder, org_concurrent_calls=2)
    model_id = await registered_llm(first, alice, url, "sk-alice")
    hanging = {"parameters": {"system_prompt": "extract facts", "user_prompt": "```json\n[{}, {}]\n```"}}
    path = f"{ML}/models/{model_id}/_predict"
    waiting = [asyncio.create_task(api.post(path, json=hanging, headers=alice.headers)) for api in (first, second)]
    deadline = asyncio.get_running_loop().time() + 30
    while len(llm.requests) < 2 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert len(llm.requests) == 2
    for api in (first, second):  # one in flight through each: the organisation's two are taken everywhere
        third = await api.post(path, json=hanging, headers=alice.headers)
        assert third.status == 429 and "2 remote model calls at once" in (await third.json())["error"]["reason"]
    llm.release.set()
    assert [(await w).status for w in waiting] == [200, 200]
    # given back when they ended: both slots are free again, in either process
    again = [api.post(path, json=hanging, headers=alice.headers) for api in (second, first)]
    assert [answer.status for answer in await asyncio.gather(*again)] == [200, 200]


async def test_a_call_whose_process_died_frees_its_slot_when_its_lease_runs_out(opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    region = OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix)
    store = OpenSearchMLStore(region)
    await store.open()
    try:
        now = [1000.0]
        budget = SharedCallBudget(lambda: store.client, store.budget_index, 0, 1, 10.0, clock=lambda: now[0])
        dying = budget.spend("org")
        await dying.__aenter__()  # its process dies mid-call: the lease is never given back
        with pytest.raises(Throttled):
            async with budget.spend("org"):
                pass
        now[0] += budget.hold_seconds + 1
        async with budget.spend("org"):
            pass
    finally:
        await store.close()
