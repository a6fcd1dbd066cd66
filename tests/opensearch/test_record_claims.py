"""Record-id claims on real nodes: several processes in front of the same two clusters, as one would be.

Each "process" is its own ``HistoryService`` with its own stores, clients and
claims object; they share nothing but OpenSearch.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from opensearchpy import AsyncOpenSearch

from embedder import AsyncEmbedder, Embedder
from memory_plugin.app import create_app
from memory_plugin.auth import Principal
from memory_plugin.errors import InvalidArgument
from memory_plugin.histories.routes import HISTORIES
from memory_plugin.histories.service import HistoryService
from memory_plugin.histories.stores import open_histories_store
from memory_plugin.histories.stores.claims import Claim, RecordClaims, RecordConflict
from memory_plugin.histories.stores.opensearch import OpenSearchHistoryStore
from memory_plugin.histories.stores.opensearch_claims import OpenSearchRecordClaims
from memory_plugin.settings import OpenSearchRegion, Settings

pytestmark = pytest.mark.opensearch

ORG = "org-1"
ADMIN = Principal(ORG)
BASE = "/v2/ai/conversation_histories"


@pytest.fixture
async def regions(opensearch_nodes, settings: Settings) -> AsyncIterator[Settings]:  # type: ignore[no-untyped-def]
    """USA (the home region) on nodes[0], DEU on nodes[1], fresh index prefixes; indices dropped after."""
    prefix = f"c-{uuid.uuid4().hex[:10]}"
    usa = OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=f"{prefix}-usa", timeout=30.0)
    deu = OpenSearchRegion(hosts=(opensearch_nodes[1].url,), index_prefix=f"{prefix}-deu", timeout=30.0)
    yield settings.replace(regions={"USA": usa, "DEU": deu}, home_region="USA", search_deadline=10.0)
    for node in opensearch_nodes:
        client = AsyncOpenSearch(hosts=[node.url], max_retries=0)
        try:
            await client.indices.delete(index=f"{prefix}-*", ignore_unavailable=True)
        finally:
            await client.close()


@asynccontextmanager
async def process(settings: Settings, embedder: Embedder, **lease: float) -> AsyncIterator[HistoryService]:
    """What one server process holds (its stores, clients and claims), built as ``open_services`` builds it."""
    stores = {name: open_histories_store(settings, name) for name in settings.regions}
    batcher = AsyncEmbedder(embedder)
    try:
        for store in stores.values():
            await store.open(embedder.dimension)
        claims = stores[settings.home_region].record_claims()
        assert isinstance(claims, OpenSearchRecordClaims)
        if lease:
            claims = OpenSearchRecordClaims(claims.client, claims.prefix, **lease)
        yield HistoryService(stores, batcher, settings.home_region, settings.search_deadline, claims=claims)
    finally:
        await batcher.close()
        for store in stores.values():
            await store.close()


def record(record_id: str, region: str, text: str) -> dict[str, Any]:
    return {"record_id": record_id, "record_type": "voice", "region": region, "text": text}


async def stored(service: HistoryService, record_id: str) -> list[dict[str, Any]]:
    """Every chunk document of ``record_id`` in every region's cluster, read from OpenSearch directly."""
    found = []
    for region, store in service.stores.items():
        assert isinstance(store, OpenSearchHistoryStore)
        query = {"bool": {"filter": [{"term": {"organization_id": ORG}}, {"term": {"record_id": record_id}}]}}
        response = await store.client.search(
            index=store.alias,
            body={"query": query, "_source": ["region", "text", "user_id", "generation", "chunk_index", "chunk_total"]},
            size=100,
            ignore_unavailable=True,
        )
        found += [{**hit["_source"], "cluster": region} for hit in response["hits"]["hits"]]
    return found


async def only_copy(service: HistoryService, record_id: str) -> dict[str, Any]:
    """The record's one document: in one region's cluster, of one version (these texts are one chunk)."""
    (document,) = await stored(service, record_id)
    assert document["region"] == document["cluster"]
    assert (document["chunk_index"], document["chunk_total"]) == (0, 1)
    return document


async def leases_left(service: HistoryService) -> int:
    claims = service.claims
    assert isinstance(claims, OpenSearchRecordClaims)
    await claims.client.indices.refresh(index=claims.index)
    return int((await claims.client.count(index=claims.index))["count"])


async def test_two_processes_racing_leave_every_record_once_and_as_acknowledged(regions, embedder) -> None:  # type: ignore[no-untyped-def]
    """Waves of concurrent writes of the same ids, to both regions, through two processes.

    Waves run one after the other, so the final text must be one acknowledged in
    the last wave that acknowledged any: an older one would be a lost update.
    """
    async with process(regions, embedder) as first, process(regions, embedder) as second:
        record_ids = [f"race-{i}" for i in range(6)]
        latest: dict[str, set[tuple[str, str]]] = {}
        conflicts = 0
        for wave in range(3):
            writes = [(record_id, n) for record_id in record_ids for n in range(4)]  # each process, each region
            random.Random(wave).shuffle(writes)

            async def write(record_id: str, n: int, wave: int = wave) -> tuple[str, tuple[str, str] | None]:
                service, region = (first, second)[n % 2], ("USA", "DEU")[n // 2 % 2]
                text = f"call {wave}.{n} about {record_id}"
                try:
                    (ack,) = await service.ingest(ADMIN, [record(record_id, region, text)])
                except RecordConflict as error:  # a clean refusal: retry later
                    assert error.parameter == "records[0].record_id" and record_id in error.reason
                    return record_id, None
                assert (ack.record_id, ack.region) == (record_id, region)
                return record_id, (region, text)

            acknowledged: dict[str, set[tuple[str, str]]] = defaultdict(set)
            for record_id, ack in await asyncio.gather(*(write(record_id, n) for record_id, n in writes)):
                if ack is None:
                    conflicts += 1
                else:
                    acknowledged[record_id].add(ack)
            latest.update(acknowledged)
            for record_id in record_ids:
                document = await only_copy(first, record_id)
                assert (document["region"], document["text"]) in latest[record_id], (document, latest[record_id])
        assert conflicts < len(writes), "nearly every write must get through"
        assert await leases_left(first) == 0  # every lease was released
        assert len(first.claims) == len(second.claims) == 0


async def test_two_users_racing_for_one_record_id_one_owns_it(regions, embedder) -> None:  # type: ignore[no-untyped-def]
    alice, bob = Principal(ORG, "alice"), Principal(ORG, "bob")
    async with process(regions, embedder) as first, process(regions, embedder) as second:
        for round_ in range(5):
            record_id = f"contested-{round_}"

            async def write(service: HistoryService, user: Principal, region: str, record_id: str = record_id) -> str:
                try:
                    await service.ingest(user, [record(record_id, region, f"call by {user.user_id}")])
                except InvalidArgument as error:
                    assert error.parameter == "records[0].record_id", error.reason
                    assert "is already used by another user of the organisation" in error.reason
                    return "refused"
                return str(user.user_id)

            outcomes = await asyncio.gather(write(first, alice, "USA"), write(second, bob, "DEU"))
            (winner,) = [outcome for outcome in outcomes if outcome != "refused"]
            assert outcomes.count("refused") == 1
            document = await only_copy(first, record_id)
            region = {"alice": "USA", "bob": "DEU"}[winner]
            assert (document["user_id"], document["text"], document["region"]) == (winner, f"call by {winner}", region)


async def test_a_dead_holders_lease_is_taken_over_once_it_expires(regions, embedder) -> None:  # type: ignore[no-untyped-def]
    # Leases long enough that a loaded machine's embedding and fan-out do not outlast them by accident.
    async with process(regions, embedder, lease=8.0, guard=1.0, wait=0.2) as writer:
        impatient = writer.claims
        assert isinstance(impatient, OpenSearchRecordClaims)
        dead = OpenSearchRecordClaims(impatient.client, impatient.prefix, lease=8.0, guard=1.0)
        held = await dead.acquire(ORG, ["orphan"])  # taken, and never released: its process died
        with pytest.raises(RecordConflict) as refused:
            await writer.ingest(ADMIN, [record("orphan", "DEU", "call while the lease lives")])
        assert refused.value.parameter == "records[0].record_id" and "[orphan]" in refused.value.reason
        with pytest.raises(RecordConflict):
            await writer.delete_record(ADMIN, "orphan")
        assert await stored(writer, "orphan") == []
        writer.claims = OpenSearchRecordClaims(impatient.client, dead.prefix, wait=30.0)
        (ack,) = await writer.ingest(ADMIN, [record("orphan", "DEU", "call after the take-over")])
        assert ack.region == "DEU"
        assert (await only_copy(writer, "orphan"))["text"] == "call after the take-over"
        with pytest.raises(RecordConflict):  # the dead holder, come back, holds nothing
            await held.confirm()
        assert await leases_left(writer) == 0


class Stalling(RecordClaims):
    """The real claims, frozen before the ``at``-th ``confirm`` of a hold, as a paused process would be."""

    def __init__(self, inner: RecordClaims, at: int) -> None:
        self.inner, self.at = inner, at
        self.stalled, self.resume = asyncio.Event(), asyncio.Event()

    @asynccontextmanager
    async def hold(self, organization_id: str, record_ids: Sequence[str]) -> AsyncIterator[Claim]:
        async with self.inner.hold(organization_id, record_ids) as claim:
            yield _Frozen(self, claim)


class _Frozen(Claim):
    def __init__(self, owner: Stalling, claim: Claim) -> None:
        self.owner, self.claim, self.confirms = owner, claim, 0

    def bounded(self) -> AbstractAsyncContextManager[None]:
        return self.claim.bounded()

    async def confirm(self) -> None:
        self.confirms += 1
        if self.confirms == self.owner.at:
            self.owner.stalled.set()
            await self.owner.resume.wait()
        await self.claim.confirm()


async def test_a_stale_holder_is_fenced_out_and_removes_nothing(regions, embedder) -> None:  # type: ignore[no-untyped-def]
    """A writer frozen between writing its copy and removing the older one, past its lease: another
    writer takes the record over and moves it; the stale one, woken, answers 409 and deletes nothing."""
    async with (
        process(regions, embedder, lease=6.0, guard=1.0) as stale,
        process(regions, embedder, wait=30.0) as fresh,
    ):
        await fresh.ingest(ADMIN, [record("moved", "DEU", "call as first written")])
        frozen = Stalling(stale.claims, at=2)  # the 1st confirm is before writing, the 2nd before removing
        stale.claims = frozen
        stale_write = asyncio.create_task(stale.ingest(ADMIN, [record("moved", "USA", "call by the stale writer")]))
        await asyncio.wait_for(frozen.stalled.wait(), timeout=60)
        assert sorted(document["cluster"] for document in await stored(fresh, "moved")) == ["DEU", "USA"]
        (ack,) = await fresh.ingest(ADMIN, [record("moved", "DEU", "call by the fresh writer")])  # waits it out
        assert ack.region == "DEU"
        frozen.resume.set()
        with pytest.raises(RecordConflict) as lost:
            await asyncio.wait_for(stale_write, timeout=60)
        assert lost.value.parameter == "records[0].record_id" and "taken over" in lost.value.reason
        document = await only_copy(fresh, "moved")
        assert (document["region"], document["text"]) == ("DEU", "call by the fresh writer")
        assert await leases_left(fresh) == 0


async def test_the_app_on_opensearch_answers_a_held_record_with_409(aiohttp_client, regions, embedder, admin) -> None:  # type: ignore[no-untyped-def]
    """``open_services`` puts the claims in the home cluster; a held id is a 409 in the API's format."""
    client = await aiohttp_client(create_app(regions, embedder=embedder))
    claims = client.app[HISTORIES].claims
    assert isinstance(claims, OpenSearchRecordClaims) and claims.index.endswith("-usa-record-claims")
    claims.wait = 0.2
    other = OpenSearchRecordClaims(claims.client, claims.prefix)
    held = await other.acquire(admin.organization_id, ["busy"])
    body = {"records": [record("busy", "DEU", "call while another process writes it")]}
    response = await client.post(BASE, json=body, headers=admin.headers)
    assert response.status == 409
    (error,) = (await response.json())["errors"]
    assert (error["code"], error["title"], error["source"]) == (
        "conflict",
        "Conflict",
        {"parameter": "records[0].record_id"},
    )
    assert "record [busy] is being written by another request" in error["detail"] and "send it again" in error["detail"]
    response = await client.delete(f"{BASE}/busy", headers=admin.headers)
    assert response.status == 409
    assert (await response.json())["errors"][0]["source"] == {"parameter": "record_id"}
    await other.release(held)
    response = await client.post(BASE, json=body, headers=admin.headers)
    assert response.status == 201, await response.text()
