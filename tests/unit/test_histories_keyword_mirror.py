"""The histories' keyword search in the lexical engine: the same ranking as FTS5's Lucene BM25, fewer postings read."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_plugin import lexical_index
from memory_plugin.histories.service import SearchQuery, hybrid
from memory_plugin.histories.stores import lexical
from memory_plugin.histories.stores.filters import Filter, parse_filters
from memory_plugin.histories.stores.records import Chunk, Record
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore
from tests.support.store_contract import BASE_TIME, DIM, unit

WORDS = [f"w{n}" for n in range(300)] + ["hiking", "hikes", "painted", "paintings", "Lisbon", "café", "cafe"]


def corpus(seed: int, count: int) -> list[tuple[Record, list[Chunk]]]:
    """Records of two organisations, two types and five users (some none), Zipf-like words, one or two chunks."""
    rng = np.random.default_rng(seed)
    vectors = unit(rng, 2 * count)
    out = []
    for i in range(count):
        org, record_type = ("org-a", "org-b")[i % 5 == 0], ("message", "voice")[i % 7 == 0]
        user = None if i % 11 == 0 else f"u-{i % 5}"
        created = BASE_TIME + timedelta(minutes=int(rng.integers(0, 10_000)))
        chunks = []
        for index in range(total := 1 + (i % 13 == 0)):
            length = int(rng.integers(1, 30))
            picks = np.minimum(rng.zipf(1.3, length) - 1, len(WORDS) - 1)
            chunks.append(Chunk(index, total, " ".join(WORDS[p] for p in picks), vectors[2 * i + index]))
        out.append((Record(org, f"r-{i}", record_type, "USA", created, BASE_TIME, user), chunks))
    return out


QUERIES = ["w0 w1", "w3 w10 w57", "hiking painted", "Hike paintings w2", "lisbon CAFE w299", "w5 w5 w6", "zzz", ""]
FILTERS = [
    Filter(),
    parse_filters([("filter[user_id]", "u-1")]),
    parse_filters([("filter[user_id][in]", "u-2,u-3")]),
    parse_filters([("filter[record_created_at][gte]", (BASE_TIME + timedelta(minutes=5000)).isoformat())]),
]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteHistoryStore]:
    store = SqliteHistoryStore(tmp_path / "usa")
    await store.open(DIM)
    yield store
    await store.close()


async def ranked_by_fts5(store: SqliteHistoryStore, *args: Any) -> list[tuple[str, int, float]]:
    """What FTS5 alone answers (the ranking before the engine), the mirror set aside for one search."""
    words = store._words
    index, words.index = words.index, None
    try:
        return [(hit.record.record_id, hit.chunk_index, hit.score) for hit in await store.keyword_search(*args)]
    finally:
        words.index = index


async def assert_same_as_fts5(store: SqliteHistoryStore) -> None:
    assert store._words.index is not None
    for org in ("org-a", "org-b"):
        for record_type in ("message", "voice"):
            for query in QUERIES:
                for where in FILTERS:
                    for k in (1, 10, 100):
                        args = (org, record_type, query, where, k)
                        found = await store.keyword_search(*args)
                        got = [(hit.record.record_id, hit.chunk_index, hit.score) for hit in found]
                        assert got == await ranked_by_fts5(store, *args), args


@pytest.mark.slow
async def test_the_engine_ranks_as_fts5_did_through_writes_replacements_and_deletes(
    store: SqliteHistoryStore,
) -> None:
    records = corpus(1, 1500)
    await store.write_records(records[:700])
    await store.keyword_index()
    await store.write_records(records[700:])  # after the build: applied to the mirror
    await assert_same_as_fts5(store)
    assert len(await store.keyword_search("org-a", "message", "w0", Filter(), 100)) == 100
    # replaced records (new words, new neighbours), deleted ones (their successors' words change)
    await store.write_records(corpus(2, 300))
    for i in range(0, 1500, 9):
        await store.delete_record("org-a" if i % 5 else "org-b", f"r-{i}")
    await store.delete_matching("org-a", parse_filters([("filter[user_id]", "u-4")]))
    await assert_same_as_fts5(store)


async def assert_hybrid_as_composed(store: SqliteHistoryStore) -> None:
    """The store's hybrid ranking on chunk ids is the service's composition of its lists, hit for hit."""
    vectors = unit(np.random.default_rng(9), len(QUERIES))
    for org in ("org-a", "org-b"):
        for query, vector in zip(QUERIES, vectors):
            for where in FILTERS:
                # the service composes from its fixed number of candidates whatever the k, and cuts at k
                asked = SearchQuery(q=query, record_type="message", where=where, mode="hybrid", top_k=30)
                composed = [(h.id, h.score) for h in await hybrid(store, org, asked, vector, where)]
                for k in (1, 10, 30):
                    found = await store.hybrid_search(org, "message", vector, query, where, k)
                    assert found is not None
                    assert [(h.id, h.score) for h in found] == composed[:k], (org, query, k)


@pytest.mark.slow
async def test_hybrid_in_the_store_ranks_as_the_service_composes(store: SqliteHistoryStore) -> None:
    records = corpus(10, 900)
    await store.write_records(records)
    await store.keyword_index()
    await assert_hybrid_as_composed(store)
    for i in range(0, 900, 4):
        await store.delete_record("org-a" if i % 5 else "org-b", f"r-{i}")
    await assert_hybrid_as_composed(store)
    await store.write_records(corpus(11, 400))  # deleted records back, others replaced: new chunks, new neighbours
    await assert_hybrid_as_composed(store)


async def test_the_engine_is_rebuilt_from_sqlite_at_open(tmp_path: Path) -> None:
    store = SqliteHistoryStore(tmp_path / "usa")
    await store.open(DIM)
    await store.write_records(corpus(3, 400))
    await store.close()
    store = SqliteHistoryStore(tmp_path / "usa")
    await store.open(DIM)
    try:
        await store.keyword_index()
        await assert_same_as_fts5(store)
    finally:
        await store.close()


async def test_writes_during_the_build_reach_the_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteHistoryStore(tmp_path / "usa")
    await store.open(DIM)
    await store.write_records(corpus(4, 300))
    await store.close()
    release, started = threading.Event(), threading.Event()
    real_bulk = lexical.bulk

    def held_bulk(*args: Any, **kwargs: Any) -> lexical_index.LexicalIndex:
        index = real_bulk(*args, **kwargs)  # the snapshot of the file before the writes below
        started.set()
        assert release.wait(30)
        return index

    monkeypatch.setattr(lexical, "bulk", held_bulk)
    store = SqliteHistoryStore(tmp_path / "usa")
    await store.open(DIM)
    try:
        for _ in range(300):  # until the build holds its snapshot: polled, with a deadline
            if started.is_set():
                break
            await store.keyword_search("org-a", "message", "w1", Filter(), 1)  # FTS5 answers meanwhile
        assert started.is_set()
        fresh = corpus(5, 120)
        await store.write_records([(r, [Chunk(0, 1, "papaya " + c[0].text, c[0].vector)]) for r, c in fresh[:60]])
        await store.delete_record("org-a", "r-1")
        release.set()
        await store.keyword_index()
        assert store._words.index is not None
        await assert_same_as_fts5(store)
        assert len(await store.keyword_search("org-a", "message", "papaya", Filter(), 100)) > 0
    finally:
        release.set()
        await store.close()


async def test_a_search_reads_fewer_postings_than_match(
    store: SqliteHistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rare word's chunk tops the list; segments whose best possible score is below it are never read (where
    the planner skips segments: it scores so few postings at once)."""
    monkeypatch.setattr(lexical_index, "EVERY_POSTINGS", 0)
    vectors = unit(np.random.default_rng(6), 4000)
    records = [
        (
            Record("org-a", f"r-{i}", "message", "USA", BASE_TIME + timedelta(minutes=i), BASE_TIME, None),
            [Chunk(0, 1, "common words " + ("zebra" if i == 3500 else f"filler{i % 50}"), vectors[i])],
        )
        for i in range(4000)
    ]
    for start in range(0, 4000, 500):
        await store.write_records(records[start : start + 500])
    await store.keyword_index()
    found = await store.keyword_search("org-a", "message", "zebra common", Filter(), 1)
    assert [hit.record.record_id for hit in found] == ["r-3500"]
    assert store._words.index is not None
    assert 0 < store._words.index.scored < 4000  # "common" alone is in 4000 chunks


async def test_neighbours_follow_chunks_then_the_users_timeline(store: SqliteHistoryStore) -> None:
    vectors = unit(np.random.default_rng(7), 10)

    def record(record_id: str, minute: int, user: str | None, texts: list[str]) -> tuple[Record, list[Chunk]]:
        created = BASE_TIME + timedelta(minutes=minute)
        chunks = [Chunk(i, len(texts), f"common {text}", vectors[i]) for i, text in enumerate(texts)]
        return Record("org-a", record_id, "message", "USA", created, BASE_TIME, user), chunks

    await store.write_records([record("r2", 3, "u-1", ["e"]), record("r1", 2, "u-1", ["b", "c", "d"])])
    await store.write_records(
        [record("r0", 1, "u-1", ["a"]), record("x", 2, "u-2", ["x"]), record("solo", 2, None, ["s"])]
    )
    found = await store.keyword_search("org-a", "message", "common", Filter(), 100)
    assert len(found) == 7
    around = await store.neighbours("org-a", found)
    text = {hit.id: hit.text.split()[1] for hit in found}
    assert {text[key]: [text[hit.id] for hit in hits] for key, hits in around.items()} == {
        "a": ["b"],
        "b": ["a", "c"],
        "c": ["b", "d"],
        "d": ["c", "e"],
        "e": ["d"],
        "x": [],
        "s": [],
    }
    await store.delete_record("org-a", "r1")
    assert await store.neighbours("org-a", found[:0]) == {}
    around = await store.neighbours("org-a", found)
    assert {text[key]: [text[hit.id] for hit in hits] for key, hits in around.items()}["a"] == ["e"]


async def test_hybrid_ties_within_a_record_fall_by_chunk_index_whatever_the_chunk_ids(
    store: SqliteHistoryStore,
) -> None:
    """Chunks of one record written out of their order, with the same words and vector: every score ties, and
    the store (which reads chunk indexes only where such ties can be) still orders them as the service does."""
    vector = unit(np.random.default_rng(12), 1)[0]
    records = [
        (
            Record("org-a", f"r-{i}", "message", "USA", BASE_TIME + timedelta(minutes=i), BASE_TIME, "u-1"),
            [Chunk(index, 3, f"kayak trip {i % 2}", vector) for index in (2, 0, 1)],
        )
        for i in range(6)
    ]
    await store.write_records(records)
    await store.keyword_index()
    for where in (Filter(), parse_filters([("filter[user_id]", "u-1")])):
        found = await store.hybrid_search("org-a", "message", vector, "kayak trip", where, 18)
        assert found is not None
        asked = SearchQuery(q="kayak trip", record_type="message", where=where, mode="hybrid", top_k=18)
        composed = await hybrid(store, "org-a", asked, vector, where)
        assert [(h.id, h.score) for h in found] == [(h.id, h.score) for h in composed]
        assert len(found) == 18
    # both lists tie throughout: their ranks, so the fused scores, come from the ties' order alone
    assert len({hit.score for hit in await store.search("org-a", "message", vector, Filter(), 18)}) == 1
    keyword = await store.keyword_search("org-a", "message", "kayak trip", Filter(), 18)
    assert len({hit.score for hit in keyword if hit.record.record_id == "r-3"}) == 1
