"""Forgetting that cascades, on a real OpenSearch cluster: the HTTP suite of ``tests/http/test_agentic_forgetting.py``
runs on OpenSearch as its ``opensearch`` backend; here, what only a cluster shows: the hidden field's mapping, a cascade run twice, and one that races a second
server process's infer run."""

from __future__ import annotations

import asyncio

import pytest

from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.auth import Principal
from tests.http.test_agentic_forgetting import SEMANTIC_CONFIG, add, call, container, history, long_term
from tests.opensearch.test_agentic_opensearch import index_prefix  # noqa: F401  (the indices' names)

pytestmark = [pytest.mark.opensearch, pytest.mark.model, pytest.mark.backends("opensearch")]


async def test_sources_are_mapped_and_hidden(api, alice, llm, opensearch_nodes, index_prefix):  # noqa: F811
    cid = await container(api, alice, SEMANTIC_CONFIG)
    working = await add(api, alice, cid, llm, ["Bob's router is a Fritzbox"])
    node = opensearch_nodes[0]
    for memory_type in ("long-term", "history"):
        status, mapping = node.request("GET", f"/{index_prefix}-ml-am-default-memory-{memory_type}/_mapping")
        assert status == 200, mapping
        sources = next(iter(mapping.values()))["mappings"]["properties"]["memory_sources"]
        assert sources["properties"]["working_memory_id"]["type"] == "keyword"
        status, found = node.request(
            "POST",
            f"/{index_prefix}-ml-am-default-memory-{memory_type}/_search",
            {"query": {"term": {"memory_sources.working_memory_id": working}}},
        )
        assert status == 200 and found["hits"]["total"]["value"] == 1, found
    [memory] = await long_term(api, alice, cid)
    assert "memory_sources" not in memory


async def test_a_cascade_run_twice_or_at_once_is_the_same(api, alice, llm):  # noqa: F811
    store, owner = api.app[AGENTIC].store, Principal("org-1", "alice")
    cid = await container(api, alice, SEMANTIC_CONFIG)
    first = await add(api, alice, cid, llm, ["Bob drinks green tea"])
    llm.decide = lambda old, facts: [{"id": old[0]["id"], "text": "Bob drinks green tea with honey", "event": "UPDATE"}]
    second = await add(api, alice, cid, llm, ["Bob takes honey"])
    # two processes forget the same working memory at once, then once more
    one, two = await asyncio.gather(store.forget(owner, cid, [second]), store.forget(owner, cid, [second]))
    again = await store.forget(owner, cid, [second])
    assert again.long_term_kept == [] and again.history_deleted == [] and again.working == []
    assert len(set(one.working) | set(two.working)) == 1
    [kept] = await long_term(api, alice, cid)
    assert kept["memory"] == "Bob drinks green tea"
    assert [entry["action"] for entry in await history(api, alice, cid)] == ["ADD"]
    await call(api, alice, "GET", f"/{cid}/memories/working/{first}")
