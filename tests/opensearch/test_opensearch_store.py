"""The OpenSearch store on a real node: the shared contract, plus parity with the embedded store."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_plugin.histories.service import SearchQuery, rank_in_region
from memory_plugin.histories.stores.filters import Filter, parse_filters
from memory_plugin.histories.stores.opensearch import OpenSearchHistoryStore
from memory_plugin.histories.stores.opensearch_documents import index_mapping
from memory_plugin.histories.stores.records import Chunk, Record
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore
from memory_plugin.settings import OpenSearchRegion
from tests.support.store_contract import BASE_TIME, DIM, FILTER_PARAMS, StoreContract, as_pairs, make_dataset, unit

pytestmark = pytest.mark.opensearch


async def open_store(url: str, **options: Any) -> OpenSearchHistoryStore:
    """A store on ``url`` with a fresh index prefix (isolation between tests), unless ``index_prefix`` is given."""
    options.setdefault("index_prefix", f"t-{uuid.uuid4().hex[:12]}")
    settings = OpenSearchRegion(hosts=(url,), timeout=30.0, **options)
    store = OpenSearchHistoryStore(settings, "USA", create_indices=("voice", "message"))
    await store.open(DIM)
    return store


async def drop(store: OpenSearchHistoryStore) -> None:
    await store.client.indices.delete(index=f"{store.prefix}-*", ignore_unavailable=True)
    await store.close()


@pytest.fixture
async def os_store(opensearch_nodes) -> AsyncIterator[OpenSearchHistoryStore]:  # type: ignore[no-untyped-def]
    store = await open_store(opensearch_nodes[0].url)
    yield store
    await drop(store)


class TestOpenSearchStoreContract(StoreContract):
    @pytest.fixture
    async def store(self, os_store: OpenSearchHistoryStore) -> OpenSearchHistoryStore:
        return os_store


async def test_same_results_as_embedded(os_store: OpenSearchHistoryStore, tmp_path: Path) -> None:
    """Same data in both stores: same order and scores within 1e-3, for several queries and filters."""
    dataset = make_dataset(seed=21, per_org=60)
    embedded = SqliteHistoryStore(tmp_path / "embedded")
    await embedded.open(DIM)
    try:
        await embedded.write_records(dataset)
        await os_store.write_records(dataset)
        queries = unit(np.random.default_rng(8), 4)
        for params in FILTER_PARAMS[::3]:
            where = parse_filters(params)
            for query in queries:
                for k in (5, 50):
                    want = as_pairs(await embedded.search("org-a", "voice", query, where, k, min_score=-0.5))
                    got = as_pairs(await os_store.search("org-a", "voice", query, where, k, min_score=-0.5))
                    assert [h for h, _ in got] == [h for h, _ in want], params
                    # OpenSearch returns (1 + cos) / 2 as a float32 that Lucene computes in its own
                    # order (HNSW on another engine); 1e-3 bounds that, as the conformance differ does
                    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-3)
    finally:
        await embedded.close()


async def test_document_layout(os_store: OpenSearchHistoryStore) -> None:
    """Seed 003's layout: org-prefixed ids, top-level keywords, metadata under data.metadata."""
    record, chunks = make_dataset()[0]
    await os_store.write_records([(record, chunks)])
    index = os_store.index_name(record.record_type)
    doc = await os_store.client.get(index=index, id=f"org-a:{record.record_id}_chunk_0")
    source = doc["_source"]
    assert source["organization_id"] == "org-a"
    assert source["data"]["metadata"]["language"] == record.metadata["language"]
    assert source["record_created_at"] == "2026-01-01T00:00:00.000000Z"
    found = await os_store.client.search(
        index=index, body={"query": {"term": {"data.metadata.language": record.metadata["language"]}}}
    )
    assert found["hits"]["total"]["value"] == len(chunks)
    mapping = await os_store.client.indices.get_mapping(index=index)
    method = mapping[index]["mappings"]["properties"]["vector"]["method"]
    assert (method["engine"], method["space_type"]) == ("lucene", "cosinesimil")


async def test_shrinking_rewrite_leaves_no_stale_chunks(os_store: OpenSearchHistoryStore) -> None:
    record, chunks = next(item for item in make_dataset() if len(item[1]) == 3)
    await os_store.write_records([(record, chunks)])
    await os_store.write_records([(replace(record, metadata={}), [Chunk(0, 1, "short", chunks[0].vector)])])
    by_id = parse_filters([("filter[record_id]", record.record_id)])
    for chunk in chunks:
        hits = await os_store.search(record.organization_id, record.record_type, chunk.vector, by_id, 10)
        assert [(hit.id, hit.text) for hit in hits] == [(f"{record.record_id}_chunk_0", "short")]
    assert await os_store.delete_record(record.organization_id, record.record_id) == 1


async def test_prefixes_are_isolated(opensearch_nodes) -> None:  # type: ignore[no-untyped-def]
    """A store whose prefix extends another's never sees nor deletes the other's documents."""
    first = await open_store(opensearch_nodes[0].url)
    second = OpenSearchHistoryStore(replace(first.settings, index_prefix=first.prefix + "-x"), "USA")
    await second.open(DIM)
    try:
        record, chunks = make_dataset()[0]
        await first.write_records([(record, chunks)])
        await second.write_records([(record, chunks)])
        assert await second.delete_record(record.organization_id, record.record_id) == len(chunks)
        hits = await first.search(record.organization_id, record.record_type, chunks[0].vector, Filter(), 5)
        assert hits and hits[0].record == record
    finally:
        await drop(second)
        await drop(first)


async def test_unreachable_cluster_opens_and_fails_per_request() -> None:
    """open() survives a dead cluster; each request then fails fast instead of hanging."""
    import time

    from opensearchpy.exceptions import ConnectionError as OSConnectionError

    from tests.support.opensearch import free_port

    store = await open_store(f"http://127.0.0.1:{free_port()}")
    try:
        started = time.perf_counter()
        with pytest.raises(OSConnectionError):
            await store.search("org-a", "voice", unit(np.random.default_rng(0), 1)[0], Filter(), 5)
        with pytest.raises(OSConnectionError):
            await store.health()
        assert time.perf_counter() - started < 3
    finally:
        await store.close()


async def test_injection_values_are_literal(os_store: OpenSearchHistoryStore) -> None:
    """Wildcard and JSON characters in values match literally, never as patterns."""
    rng = np.random.default_rng(0)
    texts = ["a*b", "a?b", "a\\b", "axb", '"}, {"match_all": {}}', "O'Brien"]
    base = make_dataset()[0][0]
    items = [
        (replace(base, record_id=f"r{i}", user_id=text, metadata={"note": text}), [Chunk(0, 1, text, unit(rng, 1)[0])])
        for i, text in enumerate(texts)
    ]
    await os_store.write_records(items)
    query = unit(rng, 1)[0]

    async def ids(params: list[tuple[str, str]]) -> set[str]:
        hits = await os_store.search("org-a", base.record_type, query, parse_filters(params), 100)
        return {hit.record.record_id for hit in hits}

    assert await ids([("filter[user_id]", "a*b")]) == {"r0"}
    assert await ids([("filter[note][contains]", "*")]) == {"r0"}
    assert await ids([("filter[note][contains]", "?")]) == {"r1"}
    assert await ids([("filter[user_id][contains]", "\\")]) == {"r2"}
    assert await ids([("filter[note]", '"}, {"match_all": {}}')]) == {"r4"}
    assert await ids([("filter[note][contains]", "o'b")]) == {"r5"}
    assert await ids([("filter[note][contains]", "B")]) == {"r0", "r1", "r2", "r3", "r5"}


def conversations(seed: int, users: int = 4, turns: int = 40) -> list[tuple[Record, list[Chunk]]]:
    """Made-up turns of content words only (no stop words, which the two analyzers treat apart)."""
    rng = np.random.default_rng(seed)
    vocabulary = [
        f"{stem}{suffix}"
        for stem in (
            "lisbon",
            "paint",
            "hike",
            "guitar",
            "recipe",
            "marathon",
            "garden",
            "novel",
            "camera",
            "violin",
            "kayak",
            "pottery",
            "chess",
            "sunset",
            "museum",
        )
        for suffix in ("", "s")
    ]
    vocabulary += [f"word{n}" for n in range(200)]
    items = []
    vectors = unit(rng, users * turns)
    for user in range(users):
        for turn in range(turns):
            words = rng.choice(vocabulary, size=int(rng.integers(4, 12)))
            record = Record(
                "org-a",
                f"u{user}-t{turn:02d}",
                "message",
                "USA",
                BASE_TIME + timedelta(minutes=turn),
                BASE_TIME,
                f"user-{user}",
            )
            items.append((record, [Chunk(0, 1, " ".join(words), vectors[user * turns + turn])]))
    return items


async def test_hybrid_ranks_as_on_the_embedded_store(os_store: OpenSearchHistoryStore, tmp_path: Path) -> None:
    """Same turns in both stores: for each query the same first hit, and at least 8 of the same top 10.

    The dense lists agree to 1e-3; the keyword lists differ only by the analyzers (Porter over unicode61
    against OpenSearch's english) and Lucene's lossy length norms, so a hit near a tie may change places.
    """
    dataset = conversations(seed=5)
    embedded = SqliteHistoryStore(tmp_path / "embedded")
    await embedded.open(DIM)
    try:
        await embedded.write_records(dataset)
        await os_store.write_records(dataset)
        rng = np.random.default_rng(6)
        for target in rng.choice(len(dataset), size=12, replace=False):
            record, chunks = dataset[int(target)]
            text = " ".join(chunks[0].text.split()[:2])
            vector = chunks[0].vector + 0.5 * unit(rng, 1)[0]
            for where in (Filter(), parse_filters([("filter[user_id]", record.user_id or "")])):
                query = SearchQuery(q=text, record_type="message", mode="hybrid", top_k=10, where=where)
                mine = await rank_in_region(embedded, "org-a", query, vector, where)
                theirs = await rank_in_region(os_store, "org-a", query, vector, where)
                assert mine and theirs, text
                assert mine[0].id == theirs[0].id, (text, as_pairs(mine[:3]), as_pairs(theirs[:3]))
                assert len({hit.id for hit in mine} & {hit.id for hit in theirs}) >= 8, (text, where)
                assert all(0 < hit.score <= 1 for hit in mine + theirs)
    finally:
        await embedded.close()


async def test_keyword_words_of_an_index_made_before_them(opensearch_nodes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An index created without ``words`` gains the field at open, and new writes are found by their words."""
    store = await open_store(opensearch_nodes[0].url)
    try:
        index = store.index_name("message")
        await store.client.indices.delete(index=index)
        mapping = index_mapping(DIM, "lucene", 16, 128)
        for field in ("words", "context_record_id"):
            del mapping["properties"][field]
        body = {
            "settings": {"index": {"knn": True, "number_of_replicas": 0}},
            "mappings": mapping,
            "aliases": {store.alias: {}},
        }
        await store.client.indices.create(index=index, body=body)
        reopened = await open_store(opensearch_nodes[0].url, index_prefix=store.prefix)
        try:
            await reopened.write_records(StoreContract.timeline(["kayak lessons", "sounds fun"]))
            found = await reopened.keyword_search("org-a", "message", "kayak", Filter(), 10)
            assert {hit.record.record_id for hit in found} == {"turn-0", "turn-1"}
        finally:
            await reopened.close()
    finally:
        await drop(store)
