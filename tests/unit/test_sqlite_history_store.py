"""The embedded store: the shared contract plus persistence, crash catch-up and the HNSW path."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memory_plugin.histories.stores import filter_columns
from memory_plugin.histories.stores.filters import Filter, parse_filters
from memory_plugin.histories.stores.records import Chunk, Record
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore
from tests.support.store_contract import (
    DIM,
    StoreContract,
    as_pairs,
    exact_hits,
    make_dataset,
    replace_and_delete,
    unit,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC)


class TestSqliteHistoryStoreContract(StoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteHistoryStore]:
        store = SqliteHistoryStore(tmp_path / "usa")
        await store.open(DIM)
        await store.keyword_index()  # keyword searches in the lexical engine from the first (FTS5 in the others)
        yield store
        await store.close()


class TestSqliteHistoryStoreHnswContract(StoreContract):
    """The contract again with ``exact_threshold=0``: every search goes through HNSW + selector."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteHistoryStore]:
        store = SqliteHistoryStore(tmp_path / "usa", exact_threshold=0, ef_search=256)
        await store.open(DIM)
        yield store
        await store.close()


class TestSqliteHistoryStoreSqlFiltersContract(StoreContract):
    """The contract again with top-level filters on SQL, the target the columns must agree with."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteHistoryStore]:
        store = SqliteHistoryStore(tmp_path / "usa", filter_target="sql")
        await store.open(DIM)
        yield store
        await store.close()


class TestSqliteHistoryStorePostingsContract(StoreContract):
    """The contract again with every string equality answered from cached positions (not only selective ones)."""

    @pytest.fixture
    async def store(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SqliteHistoryStore]:
        monkeypatch.setattr(filter_columns, "_POSTINGS_MAX_SHARE", 1.0)
        store = SqliteHistoryStore(tmp_path / "usa")
        await store.open(DIM)
        yield store
        await store.close()


@pytest.mark.parametrize("exact_threshold", [20_000, 0])
async def test_cached_positions_follow_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exact_threshold: int
) -> None:
    """Positions cached by earlier searches still agree with brute force after more inserts, replaces and deletes."""
    monkeypatch.setattr(filter_columns, "_POSTINGS_MAX_SHARE", 1.0)
    store = SqliteHistoryStore(tmp_path, exact_threshold=exact_threshold, ef_search=256)
    await store.open(DIM)
    try:
        dataset = make_dataset()
        contract = StoreContract()
        await store.write_records(dataset[:30])
        await contract.assert_filters_match(store, dataset[:30])  # fills the cache
        await store.write_records(dataset[30:])
        await contract.assert_filters_match(store, dataset)  # extends it by the rows added since
        survivors = await replace_and_delete(store, dataset)
        await contract.assert_filters_match(store, survivors)
        assert store._indexes["voice"].columns.postings._cache, "the cached positions were never used"
    finally:
        await store.close()


async def test_filter_columns_are_rebuilt_from_sqlite(tmp_path: Path) -> None:
    """After replaces and deletes, the columns reloaded from a snapshot and rebuilt from scratch still agree."""
    store = SqliteHistoryStore(tmp_path)
    await store.open(DIM)
    await store.write_records(make_dataset())
    survivors = await replace_and_delete(store, make_dataset())
    await store.close()
    contract = StoreContract()
    for how in ("snapshot", "rebuilt (no snapshot)"):
        if how != "snapshot":
            for snapshot in tmp_path.glob("hnsw-*"):
                shutil.rmtree(snapshot)
        reopened = SqliteHistoryStore(tmp_path, exact_threshold=0, ef_search=256)
        await reopened.open(DIM)
        try:
            assert set(reopened.load_report.values()) == {how}
            await contract.assert_filters_match(reopened, survivors)
        finally:
            await reopened.close()


async def test_persists_across_close_and_open(tmp_path: Path) -> None:
    dataset = make_dataset()
    store = SqliteHistoryStore(tmp_path)
    await store.open(DIM)
    await store.write_records(dataset)
    await store.delete_record("org-a", "rec-001")
    await store.close()

    reopened = SqliteHistoryStore(tmp_path)
    await reopened.open(DIM)
    try:
        assert set(reopened.load_report.values()) == {"snapshot"}
        rest = [item for item in dataset if (item[0].organization_id, item[0].record_id) != ("org-a", "rec-001")]
        query = unit(np.random.default_rng(2), 1)[0]
        for record_type in ("voice", "message"):
            hits = await reopened.search("org-a", record_type, query, Filter(), 100)
            assert [h for h, _ in as_pairs(hits)] == [
                h for h, _ in exact_hits(rest, "org-a", record_type, query, Filter(), 100)
            ]
    finally:
        await reopened.close()


async def test_catches_up_after_crash(tmp_path: Path) -> None:
    """Snapshot, then more writes and deletes, then no close(): open() must see all of it."""
    dataset = make_dataset()
    crashed = SqliteHistoryStore(tmp_path, exact_threshold=0)
    await crashed.open(DIM)
    await crashed.write_records(dataset[:40])
    await crashed.snapshot()
    await crashed.write_records(dataset[40:])
    await crashed.delete_record("org-a", "rec-002")
    replaced_vector = unit(np.random.default_rng(77), 1)[0]
    old = dataset[3][0]
    await crashed.write_records([(old, [Chunk(0, 1, "new text", replaced_vector)])])
    # Simulate SIGKILL: never close; release the SQLite handle only (WAL keeps the commits).
    await crashed._db.close()

    store = SqliteHistoryStore(tmp_path, exact_threshold=0)
    await store.open(DIM)
    try:
        assert set(store.load_report.values()) == {"snapshot"}
        expected = [
            item if item[0] != old else (old, [Chunk(0, 1, "new text", replaced_vector)])
            for item in dataset
            if (item[0].organization_id, item[0].record_id) != ("org-a", "rec-002")
        ]
        for query in unit(np.random.default_rng(5), 3):
            for record_type in ("voice", "message"):
                hits = await store.search("org-a", record_type, query, Filter(), 100)
                want = exact_hits(expected, "org-a", record_type, query, Filter(), 100)
                assert [h for h, _ in as_pairs(hits)] == [h for h, _ in want]
        hits = await store.search("org-a", old.record_type, replaced_vector, Filter(), 1)
        assert hits[0].text == "new text"
    finally:
        await store.close()


async def test_corrupt_snapshot_is_rebuilt(tmp_path: Path) -> None:
    dataset = make_dataset()
    store = SqliteHistoryStore(tmp_path)
    await store.open(DIM)
    await store.write_records(dataset)
    await store.close()
    next(tmp_path.glob("hnsw-voice.*/index.faiss")).write_bytes(b"garbage")
    reopened = SqliteHistoryStore(tmp_path)
    await reopened.open(DIM)
    try:
        assert reopened.load_report["voice"].startswith("rebuilt")
        assert reopened.load_report["message"] == "snapshot"
        query = unit(np.random.default_rng(2), 1)[0]
        hits = await reopened.search("org-a", "voice", query, Filter(), 100)
        assert [h for h, _ in as_pairs(hits)] == [
            h for h, _ in exact_hits(dataset, "org-a", "voice", query, Filter(), 100)
        ]
    finally:
        await reopened.close()


def clustered(rng: np.random.Generator, n: int, dim: int, clusters: int = 50) -> np.ndarray:
    """Embedding-like vectors: a shared direction, clusters and noise (not uniform random)."""
    shared = unit(rng, 1, dim)[0]
    centres = unit(rng, clusters, dim)
    noise = rng.standard_normal((n, dim)).astype(np.float32) * (1.4 / np.sqrt(dim))
    vectors = 1.6 * shared + centres[rng.integers(0, clusters, n)] + noise
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.slow  # recall is a property of the scale: 20k chunks
async def test_hnsw_selector_recall(tmp_path: Path) -> None:
    """20k chunks, filters passing 1% and 30%, exact path forced off: recall@10 >= 0.95 each."""
    rng = np.random.default_rng(1)
    n, dim = 20_000, 32
    vectors = clustered(rng, n, dim)
    draw = rng.random(n)
    users = np.where(draw < 0.01, "one", np.where(draw < 0.31, "thirty", "rest"))
    records = [
        (Record("org", f"r{i}", "voice", "USA", NOW, NOW, user_id=str(users[i])), [Chunk(0, 1, "", vectors[i])])
        for i in range(n)
    ]
    store = SqliteHistoryStore(tmp_path, exact_threshold=0)
    await store.open(dim)
    try:
        await store.write_records(records)
        for user in ("one", "thirty"):
            where = parse_filters([("filter[user_id]", user)])
            member = users == user
            recalls = []
            for query in clustered(np.random.default_rng(9), 30, dim):
                scores = np.where(member, vectors @ query, -np.inf)
                truth = {f"r{i}_chunk_0" for i in np.argsort(-scores)[:10]}
                hits = await store.search("org", "voice", query, where, 10)
                assert all(hit.record.user_id == user for hit in hits)
                recalls.append(len(truth & {hit.id for hit in hits}) / 10)
            assert np.mean(recalls) >= 0.95, (user, np.mean(recalls))
    finally:
        await store.close()


async def test_concurrent_searches_and_writes(tmp_path: Path) -> None:
    """Searches racing rewrites and deletes never fail nor return another org's or a deleted chunk."""
    import asyncio

    dataset = make_dataset()
    store = SqliteHistoryStore(tmp_path, exact_threshold=0)
    await store.open(DIM)
    try:
        await store.write_records(dataset)
        queries = unit(np.random.default_rng(3), 20)

        async def searcher() -> None:
            for query in queries:
                hits = await store.search("org-a", "voice", query, Filter(), 20)
                assert all(hit.record.organization_id == "org-a" for hit in hits)

        async def writer() -> None:
            for round_ in range(5):
                await store.write_records(dataset[round_ * 8 : round_ * 8 + 8])
                await store.delete_record("org-a", f"rec-{round_ * 8:03d}")

        await asyncio.gather(searcher(), writer(), searcher(), writer())
        deleted = {f"rec-{i * 8:03d}" for i in range(5)}
        rest = [item for item in dataset if not (item[0].organization_id == "org-a" and item[0].record_id in deleted)]
        for query in queries[:3]:
            hits = await store.search("org-a", "voice", query, Filter(), 100)
            assert [h for h, _ in as_pairs(hits)] == [
                h for h, _ in exact_hits(rest, "org-a", "voice", query, Filter(), 100)
            ]
    finally:
        await store.close()


async def test_bad_vector_writes_nothing(tmp_path: Path) -> None:
    from memory_plugin.errors import InvalidArgument

    dataset = make_dataset()
    store = SqliteHistoryStore(tmp_path)
    await store.open(DIM)
    try:
        bad = (dataset[1][0], [Chunk(0, 1, "x", np.ones(DIM + 1, dtype=np.float32))])
        with pytest.raises(InvalidArgument):
            await store.write_records([dataset[0], bad])
        assert (await store.health())["records"] == 0
    finally:
        await store.close()


async def test_a_store_written_before_keyword_search_gains_its_words_at_open(tmp_path: Path) -> None:
    """Schema v3 fills the words of the records already stored, each borrowing its previous turn's."""
    import sqlite3

    from tests.support.store_contract import StoreContract

    turns = StoreContract.timeline(["Did you visit Lisbon?", "Yes, twice last summer!", "What about Rome?"])
    store = SqliteHistoryStore(tmp_path / "usa")
    await store.open(DIM)
    await store.write_records(list(reversed(turns)))
    await store.close()
    with sqlite3.connect(tmp_path / "usa" / "store.sqlite3") as connection:  # as a version-2 store was
        for drop in (
            "TRIGGER chunk_words_deleted",
            "TABLE chunk_words",
            "TABLE lexical_context",
            "INDEX records_timeline",
        ):
            connection.execute(f"DROP {drop}")
        connection.execute("PRAGMA user_version=2")
    store = SqliteHistoryStore(tmp_path / "usa")
    await store.open(DIM)
    try:
        found = await store.keyword_search("org-a", "message", "Lisbon", Filter(), 10)
        assert {hit.record.record_id for hit in found} == {"turn-0", "turn-1"}
        found = await store.keyword_search("org-a", "message", "summer", Filter(), 10)
        assert {hit.record.record_id for hit in found} == {"turn-1", "turn-2"}
        await store.delete_record("org-a", "turn-1")
        assert await store.keyword_search("org-a", "message", "summer", Filter(), 10) == []
    finally:
        await store.close()
