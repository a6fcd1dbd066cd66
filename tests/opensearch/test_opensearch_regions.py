"""The full HTTP app with two regions on two real OpenSearch clusters.

The test that stops a node runs last in the module and restarts it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opensearchpy import AsyncOpenSearch

from memory_plugin.app import create_app
from memory_plugin.histories.stores.filters import MAX_IN_VALUES
from memory_plugin.settings import OpenSearchRegion, Settings
from tests.conftest import make_caller
from tests.support.erasure import erasure_scenario
from tests.support.polling import PATIENCE

pytestmark = pytest.mark.opensearch

BASE = "/v2/ai/conversation_histories"


@pytest.fixture
async def regions(opensearch_nodes, settings: Settings) -> AsyncIterator[Settings]:  # type: ignore[no-untyped-def]
    """Settings with USA on nodes[0] and DEU on nodes[1], fresh index prefixes; indices dropped after."""
    prefix = f"h-{uuid.uuid4().hex[:10]}"
    usa = OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=f"{prefix}-usa", timeout=30.0)
    deu = OpenSearchRegion(hosts=(opensearch_nodes[1].url,), index_prefix=f"{prefix}-deu", timeout=30.0)
    yield settings.replace(regions={"USA": usa, "DEU": deu}, home_region="USA", search_deadline=PATIENCE)
    for node in opensearch_nodes:
        if getattr(node, "is_running", lambda: True)():
            client = AsyncOpenSearch(hosts=[node.url], max_retries=0)
            try:
                await client.indices.delete(index=f"{prefix}-*", ignore_unavailable=True)
            finally:
                await client.close()


@pytest.fixture
async def client(aiohttp_client, regions: Settings, embedder, admin, other_admin):  # type: ignore[no-untyped-def]
    return await aiohttp_client(create_app(regions, embedder=embedder))


def record(record_id: str, region: str, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "record_id": record_id,
        "record_type": "voice",
        "region": region,
        "text": text,
        "user_id": "u-1",
        "metadata": {"language": "en"},
        **extra,
    }


async def ingest(client, caller, records) -> None:  # type: ignore[no-untyped-def]
    response = await client.post(BASE, json={"records": records}, headers=caller.headers)
    assert response.status == 201, await response.text()


async def search(client, caller, status: int = 200, **params: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    response = await client.get(BASE, params={"record_type": "voice", **params}, headers=caller.headers)
    body = await response.json()
    assert response.status == status, body
    return body


BILLING = "The customer was charged twice for the same invoice and wants a refund."
ROUTER = "Der Router verliert ständig die WLAN-Verbindung und muss neu gestartet werden."


async def test_fan_out_merges_both_clusters(client, admin) -> None:  # type: ignore[no-untyped-def]
    await ingest(client, admin, [record("bill", "USA", BILLING), record("wifi", "DEU", ROUTER)])
    body = await search(client, admin, q="billing problem, charged twice")
    assert [hit["record_id"] for hit in body["data"]] == ["bill", "wifi"]
    assert {hit["region"] for hit in body["data"]} == {"USA", "DEU"}
    assert "failed_regions" not in body["meta"]
    assert 0.0 < body["data"][1]["score"] < body["data"][0]["score"] <= 1.0
    only = await search(client, admin, q="router wifi", region="DEU")
    assert [hit["record_id"] for hit in only["data"]] == ["wifi"]
    # Re-ingesting a record into the other region moves it (no copy left behind).
    await ingest(client, admin, [record("wifi", "USA", ROUTER)])
    body = await search(client, admin, q="router wifi")
    assert [(hit["record_id"], hit["region"]) for hit in body["data"] if hit["record_id"] == "wifi"] == [
        ("wifi", "USA")
    ]
    response = await client.delete(f"{BASE}/wifi", headers=admin.headers)
    assert (await response.json())["data"]["deleted_chunks"] == 1


async def test_organisations_stay_apart(client, admin, other_admin) -> None:  # type: ignore[no-untyped-def]
    await ingest(client, admin, [record("same", "USA", BILLING), record("same-de", "DEU", ROUTER)])
    await ingest(client, other_admin, [record("same", "USA", BILLING), record("same-de", "DEU", ROUTER)])
    for caller in (admin, other_admin):
        body = await search(client, caller, q="charged twice")
        assert len(body["data"]) == 2
        assert {hit["organization_id"] for hit in body["data"]} == {caller.organization_id}
        widened = await search(client, caller, q="charged twice", **{"filter[organization_id]": "org-2"})
        assert {hit["organization_id"] for hit in widened["data"]} <= {caller.organization_id}
    response = await client.delete(BASE, params={"filter[user_id]": "u-1"}, headers=admin.headers)
    assert (await response.json())["data"] == {
        "deleted_records": 2,
        "deleted_chunks": 2,
        "deleted_memories": 0,
        "deleted_messages": 0,
        "deleted_memory_containers": 0,
        "deleted_ml_documents": 0,
    }
    assert (await search(client, admin, q="charged twice"))["data"] == []
    assert len((await search(client, other_admin, q="charged twice"))["data"]) == 2


INJECTIONS = ['a"b', "x*", "x?y", "back\\slash", '"}}, {"match_all": {}}', "' OR 1=1 --", "*"]


async def test_injection_values_match_literally(client, admin) -> None:  # type: ignore[no-untyped-def]
    records = [
        record(f"r{i}", "USA" if i % 2 else "DEU", BILLING, metadata={"note": value}, user_id=value)
        for i, value in enumerate(INJECTIONS)
    ]
    records.append(record("plain", "USA", BILLING, metadata={"note": "xay"}, user_id="xay"))
    await ingest(client, admin, records)
    for i, value in enumerate(INJECTIONS):
        for params in ({"filter[note]": value}, {"filter[user_id]": value}):
            body = await search(client, admin, q="invoice", **params)
            assert [hit["record_id"] for hit in body["data"]] == [f"r{i}"], (value, params)
    contains_star = await search(client, admin, q="invoice", **{"filter[note][contains]": "*"})
    assert {hit["record_id"] for hit in contains_star["data"]} == {"r1", "r6"}
    contains_q = await search(client, admin, q="invoice", **{"filter[user_id][contains]": "?"})
    assert {hit["record_id"] for hit in contains_q["data"]} == {"r2"}
    for bad in ("filter[a.b]", "filter[data.metadata.note]", "filter[x][y][z]", "filter[note[0]]"):
        response = await client.get(BASE, params={"record_type": "voice", "q": "x", bad: "1"}, headers=admin.headers)
        assert response.status == 400, bad


async def test_the_largest_in_list_is_one_terms_query_per_type(client, admin) -> None:  # type: ignore[no-untyped-def]
    """1000 values (the documented maximum) on both clusters: no region fails (max_clause_count is 1024)."""
    await ingest(
        client,
        admin,
        [
            record("in-de", "USA", BILLING, metadata={"lang": "de", "minutes": 7}),
            record("in-fr", "DEU", ROUTER, metadata={"lang": "fr", "minutes": 8}, user_id="u-2"),
        ],
    )
    for name, values, expected in (
        ("filter[lang][in]", [str(i) for i in range(MAX_IN_VALUES - 2)] + ["de", "fr"], ["in-de", "in-fr"]),
        ("filter[minutes][in]", [str(i) for i in range(100, 100 + MAX_IN_VALUES - 1)] + ["8"], ["in-fr"]),
        ("filter[user_id][in]", [str(i) for i in range(MAX_IN_VALUES - 1)] + ["u-2"], ["in-fr"]),
    ):
        body = await search(client, admin, q="call", top_k="100", **{name: ",".join(values)})
        assert "failed_regions" not in body["meta"], body
        assert sorted(hit["record_id"] for hit in body["data"]) == expected, name
    too_many = ",".join(str(i) for i in range(MAX_IN_VALUES + 1))
    body = await search(client, admin, status=400, q="call", **{"filter[lang][in]": too_many})
    assert body["errors"][0]["source"]["parameter"] == "filter[lang][in]"
    users = ",".join([str(i) for i in range(MAX_IN_VALUES - 1)] + ["u-2"])
    response = await client.delete(BASE, params={"filter[user_id][in]": users}, headers=admin.headers)
    assert response.status == 200, await response.text()
    assert (await response.json())["data"]["deleted_records"] == 1
    body = await search(client, admin, q="call", top_k="100")
    assert [hit["record_id"] for hit in body["data"]] == ["in-de"]


async def test_erasing_a_user_takes_their_memory_on_opensearch_too(client, keys, admin, alice, bob) -> None:  # type: ignore[no-untyped-def]
    await erasure_scenario(client, admin, alice, bob, make_caller(keys, "org-2", "alice"))


def region_failures(caplog: pytest.LogCaptureFixture, region: str) -> list[str]:
    """What the fan-out logged of ``region``'s failures."""
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"region {region} failed:")]


async def test_unreachable_region_fails_fast(aiohttp_client, regions: Settings, embedder, admin, caplog) -> None:  # type: ignore[no-untyped-def]
    """A dead cluster fails on its own refused connection, not by the search deadline (generous here, so
    that the live region answers within it on a loaded machine)."""
    from tests.support.opensearch import free_port

    dead = OpenSearchRegion(hosts=(f"http://127.0.0.1:{free_port()}",), index_prefix="dead")
    settings = regions.replace(regions={**regions.regions, "DEU": dead})
    healthy = await aiohttp_client(create_app(regions, embedder=embedder))
    await ingest(healthy, admin, [record("bill", "USA", BILLING)])
    client = await aiohttp_client(create_app(settings, embedder=embedder))  # starts despite the dead cluster
    body = await search(client, admin, q="charged twice")
    assert body["meta"]["failed_regions"] == ["DEU"]
    (failure,) = region_failures(caplog, "DEU")
    assert "ConnectionError" in failure and "Timeout" not in failure, failure
    assert [hit["record_id"] for hit in body["data"]] == ["bill"]
    await search(client, admin, status=503, q="charged twice", region="DEU")


async def test_zz_stopped_cluster_is_a_failed_region(client, admin, opensearch_nodes, caplog) -> None:  # type: ignore[no-untyped-def]
    """Runs last: stops DEU's node, then restarts it for whoever comes next."""
    await ingest(client, admin, [record("bill", "USA", BILLING), record("wifi", "DEU", ROUTER)])
    opensearch_nodes[1].stop()
    try:
        body = await search(client, admin, q="charged twice")
        assert body["meta"]["failed_regions"] == ["DEU"]
        (failure,) = region_failures(caplog, "DEU")  # refused at once, not waited out to the deadline
        assert "ConnectionError" in failure and "Timeout" not in failure, failure
        assert [hit["record_id"] for hit in body["data"]] == ["bill"]
        await search(client, admin, status=503, q="router", region="DEU")
    finally:
        opensearch_nodes[1].start()
    body = await search(client, admin, q="charged twice")
    assert "failed_regions" not in body["meta"]
    assert len(body["data"]) == 2
