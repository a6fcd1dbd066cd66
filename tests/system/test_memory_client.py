"""The real opensearch-py client drives the 2.11 API over a socket."""

from __future__ import annotations

import pytest
from opensearchpy import AsyncOpenSearch, NotFoundError, TransportError

from memory_plugin.auth import KeyStore
from tests.support.live import LiveServer

BASE = "/_plugins/_ml/memory/conversation"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("live") / "data"
    keys = KeyStore(data_dir / "keys.json")
    entry, token = keys.create("org-1", "alice")
    with LiveServer(data_dir) as live:
        live.token = token  # type: ignore[attr-defined]
        live.key_id, live.secret = token.split(".", 1)  # type: ignore[attr-defined]
        yield live


def make_client(server, auth: str) -> AsyncOpenSearch:
    if auth == "basic":
        return AsyncOpenSearch(hosts=[server.url], http_auth=(server.key_id, server.secret))
    return AsyncOpenSearch(hosts=[server.url], headers={"Authorization": f"Bearer {server.token}"})


@pytest.mark.parametrize("auth", ["basic", "bearer"])
async def test_all_five_endpoints_through_opensearch_py(server, auth):
    client = make_client(server, auth)
    try:
        info = await client.info()
        assert info["version"]["distribution"] == "opensearch"
        created = await client.transport.perform_request("POST", BASE, body={"name": f"via {auth}"})
        conversation_id = created["conversation_id"]
        interaction = await client.transport.perform_request(
            "POST", f"{BASE}/{conversation_id}", body={"input": "What are the sort benchmarks", "response": "A series"}
        )
        listing = await client.transport.perform_request("GET", BASE, params={"max_results": 100})
        assert conversation_id in [c["conversation_id"] for c in listing["conversations"]]
        interactions = await client.transport.perform_request("GET", f"{BASE}/{conversation_id}")
        assert [i["interaction_id"] for i in interactions["interactions"]] == [interaction["interaction_id"]]
        assert interactions["interactions"][0]["input"] == "What are the sort benchmarks"
        deleted = await client.transport.perform_request("DELETE", f"{BASE}/{conversation_id}")
        assert deleted == {"success": True}
        with pytest.raises(NotFoundError):
            await client.transport.perform_request("GET", f"{BASE}/{conversation_id}")
        with pytest.raises(TransportError) as bad:
            await client.transport.perform_request("GET", BASE, params={"max_results": 0})
        assert bad.value.status_code == 400
    finally:
        await client.close()
