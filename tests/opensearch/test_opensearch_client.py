"""The OpenSearch helpers every store shares, on a real node."""

from __future__ import annotations

import uuid

import pytest

from memory_plugin import opensearch_client
from memory_plugin.opensearch_client import bulk, make_client, scan
from memory_plugin.settings import OpenSearchRegion

pytestmark = pytest.mark.opensearch


@pytest.fixture
async def client(opensearch_nodes):  # type: ignore[no-untyped-def]
    client = make_client(OpenSearchRegion(hosts=(opensearch_nodes[0].url,)))
    yield client
    await client.close()


@pytest.mark.parametrize("page", [opensearch_client.SCAN_PAGE, 3])
async def test_scan_yields_every_hit_whether_a_page_holds_them_or_a_scroll_is_needed(
    client, opensearch_nodes, monkeypatch, page
):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(opensearch_client, "SCAN_PAGE", page)
    index = f"mp-scan-{uuid.uuid4().hex[:12]}"
    try:
        actions = []
        for n in range(10):
            actions += [{"index": {"_index": index, "_id": f"d{n}"}}, {"n": n, "odd": n % 2 == 1}]
        await bulk(client, actions, refresh=True)
        odd = {"term": {"odd": True}}
        assert sorted([hit["_id"] async for hit in scan(client, index, odd, ["n"])]) == ["d1", "d3", "d5", "d7", "d9"]
        assert sorted([hit["_source"]["n"] async for hit in scan(client, index, {"match_all": {}}, ["n"])]) == list(
            range(10)
        )
        assert [hit async for hit in scan(client, index, {"term": {"n": 99}})] == []
        assert [hit async for hit in scan(client, f"{index}-missing", {"match_all": {}})] == []
    finally:
        opensearch_nodes[0].request("DELETE", f"/{index}")
