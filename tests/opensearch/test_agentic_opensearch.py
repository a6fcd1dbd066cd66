"""Agentic memory with the home region on a real OpenSearch cluster (2.19.1 with k-NN).

The whole agentic HTTP suite (``tests/http/test_agentic*.py``) runs on OpenSearch as its ``opensearch``
backend (``backend`` in tests/conftest.py puts the home region on a real node).  Here the cluster itself is
checked: ml-commons' index layout and mappings, k-NN through the knn plugin, and the owner filter on what is
stored.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore
from memory_plugin.app import create_app
from memory_plugin.auth import Principal
from tests.http.test_agentic import SEMANTIC_CONFIG, call, container, conversation, error, seed_long_term
from tests.http.test_agentic_models import LOOPBACK, check_remote_embeddings, remote_embedding_container
from tests.support.agentic_llm import ScriptedLLM
from tests.support.scripted_openai import DIMENSION, ScriptedOpenAI

pytestmark = [pytest.mark.opensearch, pytest.mark.model, pytest.mark.backends("opensearch")]


@pytest.fixture
def index_prefix(opensearch_nodes):  # type: ignore[no-untyped-def]
    prefix = f"mp-am-{uuid.uuid4().hex[:12]}"
    yield prefix
    opensearch_nodes[0].request("DELETE", f"/{prefix}-*")


async def test_the_suite_really_runs_on_opensearch(api, alice, llm: ScriptedLLM, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    assert isinstance(api.app[AGENTIC].store, OpenSearchAgenticStore)
    cid = await container(api, alice, SEMANTIC_CONFIG)
    await seed_long_term(api, alice, cid, llm, ["Bob's router is a Fritzbox"])
    node = opensearch_nodes[0]
    status, mapping = node.request("GET", f"/{index_prefix}-ml-am-default-memory-long-term/_mapping")
    assert status == 200, mapping
    properties = next(iter(mapping.values()))["mappings"]["properties"]
    assert properties["memory_embedding"]["type"] == "knn_vector" and properties["memory_embedding"]["dimension"] == 384
    assert properties["memory_embedding"]["method"]["engine"] == "lucene"
    assert properties["namespace"]["type"] == "flat_object" and properties["memory"]["type"] == "text"
    status, working = node.request("GET", f"/{index_prefix}-ml-am-default-memory-working/_mapping")
    assert next(iter(working.values()))["mappings"]["properties"]["messages"]["type"] == "nested"
    status, found = node.request(
        "POST",
        f"/{index_prefix}-ml-am-default-memory-long-term/_search",
        {"query": {"term": {"namespace.user_id": "bob"}}},
    )
    [hit] = found["hits"]["hits"]
    assert hit["_source"]["tenant_id"] == "org-1" and hit["_source"]["owner_id"] == "alice"
    assert hit["_source"]["embedding_pending"] is False and len(hit["_source"]["memory_embedding"]) == 384
    status, history = node.request(
        "POST", f"/{index_prefix}-ml-am-default-memory-history/_search", {"query": {"term": {"action": "ADD"}}}
    )
    assert history["hits"]["hits"][0]["_source"]["memory_id"] == hit["_id"]
    # what the API shows hides the store's own fields
    shown = await call(api, alice, "GET", f"/{cid}/memories/long-term/{hit['_id']}")
    assert "tenant_id" not in shown and "embedding_pending" not in shown and len(shown["memory_embedding"]) == 384


async def test_a_write_racing_a_container_delete_leaves_nothing_behind(api, alice, opensearch_nodes, index_prefix):  # type: ignore[no-untyped-def]
    """OpenSearch has no transaction: the container was checked, then deleted (here, or by another server whose
    cache knew nothing of it), then the add's bulk went out. It answered 200, and its working memory and session
    stayed in the indices, unreachable by any path and never erased."""
    store = api.app[AGENTIC].store
    client, owner = store.client, Principal(alice.organization_id, alice.user_id)
    bulk, index = store._bulk, client.index

    async def deleted_first(write: Any, *args: Any, **kwargs: Any) -> Any:
        await store.delete_container(owner, cid)  # the concurrent DELETE lands between the check and the write
        return await write(*args, **kwargs)

    def in_container() -> int:
        query = {"query": {"term": {"memory_container_id": cid}}}
        status, counted = opensearch_nodes[0].request("POST", f"/{index_prefix}-ml-am-*/_count", query)
        assert status == 200, counted
        return int(counted["count"])

    cid = await container(api, alice)
    await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation("warm")})  # the indices exist
    assert in_container() == 1
    store._bulk = lambda actions: deleted_first(bulk, actions)
    added = {"messages": conversation("hi"), "namespace": {"session_id": "s1"}}
    try:
        await error(
            api, alice, "POST", f"/{cid}/memories", added, 404, "Memory container not found", "status_exception"
        )
    finally:
        store._bulk = bulk
    assert in_container() == 0
    cid = await container(api, alice)
    await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s0"})
    client.index = lambda *args, **kwargs: deleted_first(index, *args, **kwargs)
    try:
        await error(
            api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s2"}, 404, "Memory container not found"
        )
    finally:
        client.index = index
    assert in_container() == 0


async def test_a_remote_embedding_model_of_another_dimension_has_a_knn_index_of_its_own(  # type: ignore[no-untyped-def]
    aiohttp_client, settings, embedder, llm, embeddings: ScriptedOpenAI, opensearch_nodes, index_prefix, alice
):
    settings = settings.replace(
        ml={"trusted_endpoints_regex": (LOOPBACK,), "allow_private_addresses": True},
        agentic={"llm": {"url": str(llm.server.make_url("/v1/chat/completions")), "api_key": "sk-test"}},
    )
    api = await aiohttp_client(create_app(settings, embedder=embedder))
    built_in = await container(api, alice, SEMANTIC_CONFIG)  # the built-in model, in the same index prefix
    await seed_long_term(api, alice, built_in, llm, ["Bob's router is a Fritzbox"])
    llm.url = str(llm.server.make_url("")).rstrip("/")
    cid = await remote_embedding_container(api, alice, llm, embeddings)
    await check_remote_embeddings(api, alice, cid, embeddings)
    node = opensearch_nodes[0]
    dimensions = {}
    for suffix in ("", f"-{DIMENSION}d"):
        status, mapping = node.request("GET", f"/{index_prefix}-ml-am-default-memory-long-term{suffix}/_mapping")
        assert status == 200, mapping
        dimensions[suffix] = next(iter(mapping.values()))["mappings"]["properties"]["memory_embedding"]["dimension"]
    assert dimensions == {"": 384, f"-{DIMENSION}d": DIMENSION}
    found = await call(api, alice, "POST", f"/{built_in}/memories/long-term/_semantic_search", {"query": "router"})
    assert [hit["_source"]["memory"] for hit in found["hits"]["hits"]] == ["Bob's router is a Fritzbox"]
    # deleting the container removes the memories in its own index
    await call(api, alice, "DELETE", f"/{cid}")
    status, count = node.request("GET", f"/{index_prefix}-ml-am-default-memory-long-term-{DIMENSION}d/_count")
    assert count["count"] == 0
