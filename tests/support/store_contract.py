"""The behaviour every HistoryStore must show, written once for all of them.

Subclass :class:`StoreContract` in a ``test_*.py`` module and provide an async
``store`` fixture yielding an opened store of dimension :data:`DIM`.  Truth
comes from brute force: :func:`matches` over the records written, and exact
cosine ranking with numpy.  Approximate stores may raise ``score_tolerance``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memory_plugin.histories.stores.base import HistoryStore
from memory_plugin.histories.stores.filters import Condition, Filter, matches, parse_filters
from memory_plugin.histories.stores.records import Chunk, Hit, Record
from tests.support.polling import eventually

DIM = 16
ORGS = ("org-a", "org-b")
TYPES = ("voice", "message")
REGIONS = ("USA", "DEU", "AUS", "UAE")
BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def make_dataset(seed: int = 7, per_org: int = 40) -> list[tuple[Record, list[Chunk]]]:
    """Records in two orgs (org-b mirrors org-a's texts and vectors), two types, 1-3 chunks."""
    rng = np.random.default_rng(seed)
    languages = ("en", "de", "EN", "Français")
    items: list[tuple[Record, list[Chunk]]] = []
    template: list[tuple[Record, list[Chunk]]] = []
    for i in range(per_org):
        metadata: dict[str, str | int | float | bool] = {
            "language": languages[i % 4],
            "score": [5, 5.0, 7.5, 12][i % 4],
        }
        if i % 3 == 0:
            metadata["urgent"] = i % 2 == 0
        if i % 5 == 0:
            metadata["score"] = str(i)  # a numeric-looking string: compares as a string
        record = Record(
            organization_id=ORGS[0],
            record_id=f"rec-{i:03d}",
            record_type=TYPES[i % 2],
            region=REGIONS[i % 4],
            record_created_at=BASE_TIME + timedelta(days=i, microseconds=i),
            ingested_at=BASE_TIME + timedelta(days=i, hours=1),
            user_id=None if i % 7 == 0 else f"user-{i % 4}",
            document_id=f"doc-{i % 3}" if i % 2 else None,
            retention="short" if i % 2 else "Long Term",
            metadata=metadata,
        )
        total = 1 + i % 3
        vectors = unit(rng, total)
        chunks = [Chunk(j, total, f"Text {i} part {j} Über billing", vectors[j]) for j in range(total)]
        template.append((record, chunks))
    items += template
    items += [(replace(record, organization_id=ORGS[1]), chunks) for record, chunks in template]
    return items


def exact_hits(
    items: Sequence[tuple[Record, Sequence[Chunk]]],
    organization_id: str,
    record_type: str,
    vector: np.ndarray,
    where: Filter,
    k: int,
    min_score: float | None = None,
) -> list[tuple[str, float]]:
    """Brute-force truth: ``(chunk id, cosine)`` best first."""
    query = vector / np.linalg.norm(vector)
    scored = [
        (f"{record.record_id}_chunk_{chunk.index}", float(np.dot(chunk.vector, query)))
        for record, chunks in items
        if record.organization_id == organization_id and record.record_type == record_type and matches(where, record)
        for chunk in chunks
    ]
    scored.sort(key=lambda item: -item[1])
    if min_score is not None:
        scored = [item for item in scored if item[1] >= min_score]
    return scored[:k]


async def replace_and_delete(
    store: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]
) -> list[tuple[Record, list[Chunk]]]:
    """Rewrite every third record with other field values (some change type), delete some; return the survivors.

    Each rewritten record differs in every filterable top-level field, so a
    store that filters on a stale copy of a record's fields gives itself away.
    """
    rng = np.random.default_rng(13)
    current = {(record.organization_id, record.record_id): (record, chunks) for record, chunks in dataset}
    rewritten: list[tuple[Record, list[Chunk]]] = []
    for record, _ in list(current.values())[::3]:
        i = int(record.record_id[-3:])
        new = replace(
            record,
            record_type=TYPES[(i // 3) % 2],
            user_id=None if record.user_id else f"user-{(i + 1) % 4}",
            region=REGIONS[(i + 1) % 4],
            document_id=None if record.document_id else f"doc-{(i + 1) % 3}",
            retention="Long Term" if record.retention == "short" else "short",
            record_created_at=record.record_created_at + timedelta(days=9, microseconds=3),
            ingested_at=record.ingested_at + timedelta(days=9),
        )
        total = 1 + (i + 1) % 3
        vectors = unit(rng, total)
        chunks = [Chunk(j, total, f"Text {i} rewritten part {j}", vectors[j]) for j in range(total)]
        rewritten.append((new, chunks))
        current[(record.organization_id, record.record_id)] = (new, chunks)
    await store.write_records(rewritten)
    for key in list(current)[1::5]:
        assert await store.delete_record(*key) == len(current.pop(key)[1])
    gone = parse_filters([("filter[user_id]", "user-2")])
    await store.delete_matching("org-a", gone)
    return [item for key, item in current.items() if not (key[0] == "org-a" and matches(gone, item[0]))]


def as_pairs(hits: Sequence[Hit]) -> list[tuple[str, float]]:
    return [(hit.id, hit.score) for hit in hits]


#: Filters that exercise every operator on top-level, date and metadata fields.
FILTER_PARAMS: list[list[tuple[str, str]]] = [
    [],
    [("filter[user_id]", "user-1")],
    [("filter[user_id][in]", "user-1,user-3")],
    [("filter[user_id][gte]", "user-2")],
    [("filter[user_id][lt]", "user-2")],
    [("filter[user_id][contains]", "SER-3")],
    [("filter[region][in]", "USA,DEU")],
    [("filter[region]", "AUS")],
    [("filter[document_id]", "doc-1")],
    [("filter[record_id]", "rec-004")],
    [("filter[record_id][contains]", "00")],
    [("filter[retention]", "Long Term")],
    [("filter[retention][contains]", "long")],
    [("filter[record_created_at][gte]", "2026-01-10")],
    [("filter[record_created_at][gt]", "2026-01-11T00:00:00.000010Z")],
    [("filter[record_created_at][lt]", "2026-01-11T00:00:00.000010+00:00")],
    [("filter[record_created_at][lte]", "2026-01-11T02:00:00.000010+02:00")],
    [("filter[record_created_at]", "2026-01-11T00:00:00.000010Z")],
    [("filter[record_created_at][in]", "2026-01-11T00:00:00.000010Z,2026-01-03T00:00:00.000002Z")],
    [("filter[ingested_at][gte]", "2026-01-05T00:00:00Z"), ("filter[ingested_at][lte]", "2026-01-20T01:00:00Z")],
    [("filter[language]", "en")],
    [("filter[language][in]", "en,de")],
    [("filter[language][contains]", "ANÇ")],
    [("filter[language][gt]", "E")],
    [("filter[score]", "5")],
    [("filter[score]", "5.0")],
    [("filter[score][in]", "7.5,12")],
    [("filter[score][gte]", "7.5")],
    [("filter[score][lt]", "10")],
    [("filter[score][gt]", "2")],  # string "20", "30" > "2"; numbers > 2
    [("filter[score][contains]", "1")],
    [("filter[urgent]", "true")],
    [("filter[urgent]", "false")],
    [("filter[urgent][in]", "true,false")],
    [("filter[missing]", "x")],
    [("filter[user_id]", "user-1"), ("filter[language]", "en")],
    [("filter[region][in]", "UAE"), ("filter[record_created_at][lt]", "2026-02-01")],
]


class StoreContract:
    """Store-level behaviour shared by every implementation (needs a ``store`` fixture)."""

    #: Score tolerance against exact cosine (float64 numpy): a store's float32 inner product
    #: (about 1e-7 off at these dimensions) plus rounding to six places (5e-7); approximate
    #: stores may widen it.
    score_tolerance: float = 1e-5

    def assert_same(self, hits: Sequence[Hit], expected: list[tuple[str, float]]) -> None:
        got = as_pairs(hits)
        assert [hit_id for hit_id, _ in got] == [hit_id for hit_id, _ in expected]
        for (_, score), (_, truth) in zip(got, expected):
            assert score == pytest.approx(truth, abs=self.score_tolerance)
        assert all(a >= b for (_, a), (_, b) in zip(got, got[1:]))

    @pytest.fixture
    def dataset(self) -> list[tuple[Record, list[Chunk]]]:
        return make_dataset()

    @pytest.fixture
    async def loaded(self, store: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]) -> HistoryStore:
        await store.write_records(dataset)
        return store

    async def test_filters_match_brute_force(
        self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]], subtests: pytest.Subtests
    ) -> None:
        """Every filter case on one loaded store, each a subtest: loading the store again for each case took
        three times its searches."""
        queries = unit(np.random.default_rng(11), 3)
        for params in FILTER_PARAMS:
            with subtests.test("&".join(f"{k}={v}" for k, v in params) or "none"):
                where = parse_filters(params)
                for org in ORGS:
                    for record_type in TYPES:
                        for query in queries:
                            hits = await loaded.search(org, record_type, query, where, 100)
                            self.assert_same(hits, exact_hits(dataset, org, record_type, query, where, 100))
                            assert all(
                                hit.record.organization_id == org and hit.record.record_type == record_type
                                for hit in hits
                            )
                            assert all(matches(where, hit.record) for hit in hits)

    async def test_filters_after_replaces_and_deletes(
        self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]
    ) -> None:
        survivors = await replace_and_delete(loaded, dataset)
        await self.assert_filters_match(loaded, survivors)

    async def assert_filters_match(self, store: HistoryStore, items: list[tuple[Record, list[Chunk]]]) -> None:
        """Every filter case, both orgs and types: the store's hits are the brute-force ones over ``items``."""
        query = unit(np.random.default_rng(17), 1)[0]
        for params in FILTER_PARAMS:
            where = parse_filters(params)
            for org in ORGS:
                for record_type in TYPES:
                    hits = await store.search(org, record_type, query, where, 100)
                    self.assert_same(hits, exact_hits(items, org, record_type, query, where, 100))

    async def test_k_truncation_and_min_score(
        self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]
    ) -> None:
        query = unit(np.random.default_rng(3), 1)[0]
        for k in (1, 3, 10):
            hits = await loaded.search("org-a", "voice", query, Filter(), k)
            self.assert_same(hits, exact_hits(dataset, "org-a", "voice", query, Filter(), k))
        hits = await loaded.search("org-a", "voice", query, Filter(), 100, min_score=0.2)
        self.assert_same(hits, exact_hits(dataset, "org-a", "voice", query, Filter(), 100, min_score=0.2))
        assert all(hit.score >= 0.2 for hit in hits)
        assert await loaded.search("org-a", "voice", query, Filter(), 100, min_score=1.01) == []

    async def test_hit_fields_round_trip(self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]) -> None:
        record, chunks = next(item for item in dataset if len(item[1]) == 3 and item[0].organization_id == "org-a")
        hits = await loaded.search("org-a", record.record_type, chunks[2].vector, Filter(), 1)
        assert hits[0].id == f"{record.record_id}_chunk_2"
        assert hits[0].score == pytest.approx(1.0, abs=self.score_tolerance)
        assert (hits[0].chunk_index, hits[0].chunk_total, hits[0].text) == (2, 3, chunks[2].text)
        assert hits[0].record == record

    async def test_organisation_isolation(self, loaded: HistoryStore) -> None:
        query = unit(np.random.default_rng(5), 1)[0]
        for params in FILTER_PARAMS:
            where = parse_filters(params)
            for org in ORGS:
                hits = await loaded.search(org, "voice", query, where, 100)
                assert {hit.record.organization_id for hit in hits} <= {org}
        assert await loaded.search("org-unknown", "voice", query, Filter(), 10) == []

    async def test_record_type_isolation(self, loaded: HistoryStore) -> None:
        query = unit(np.random.default_rng(5), 1)[0]
        where = Filter((Condition("record_type", "eq", ("message",)),))
        assert await loaded.search("org-a", "voice", query, where, 100) == []
        assert await loaded.search("org-a", "kb-nothing", query, Filter(), 100) == []

    async def test_rewrite_replaces_all_chunks(
        self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]
    ) -> None:
        record, chunks = next(item for item in dataset if len(item[1]) == 3 and item[0].organization_id == "org-a")
        new_type = "message" if record.record_type == "voice" else "voice"
        moved = replace(record, record_type=new_type, metadata={"language": "xx"})
        vector = unit(np.random.default_rng(99), 1)[0]
        await loaded.write_records([(moved, [Chunk(0, 1, "replaced", vector)])])
        by_id = Filter((Condition("record_id", "eq", (record.record_id,)),))
        assert await loaded.search("org-a", record.record_type, chunks[0].vector, by_id, 10) == []
        hits = await loaded.search("org-a", new_type, vector, by_id, 10)
        assert [(hit.id, hit.text, hit.record) for hit in hits] == [(f"{record.record_id}_chunk_0", "replaced", moved)]
        # The other org's copy is untouched.
        other = await loaded.search("org-b", record.record_type, chunks[0].vector, by_id, 10)
        assert len(other) == 3
        # No stale chunk of the old version surfaces for any query.
        for query in [c.vector for c in chunks]:
            hits = await loaded.search("org-a", record.record_type, query, Filter(), 100)
            assert record.record_id not in {hit.record.record_id for hit in hits}

    async def test_reingestion_is_idempotent(
        self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]
    ) -> None:
        query = unit(np.random.default_rng(8), 1)[0]
        before = as_pairs(await loaded.search("org-a", "voice", query, Filter(), 100))
        await loaded.write_records(dataset)
        await loaded.write_records(dataset[:5])
        after = await loaded.search("org-a", "voice", query, Filter(), 100)
        self.assert_same(after, before)
        assert (await loaded.health())["records"] == len(dataset)
        assert (await loaded.health())["chunks"] == sum(len(chunks) for _, chunks in dataset)

    async def test_delete_record(self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]) -> None:
        record, chunks = next(item for item in dataset if len(item[1]) == 2 and item[0].organization_id == "org-a")
        assert await loaded.delete_record("org-a", record.record_id) == 2
        assert await loaded.delete_record("org-a", record.record_id) == 0
        assert await loaded.delete_record("org-a", "rec-unknown") == 0
        for chunk in chunks:
            hits = await loaded.search("org-a", record.record_type, chunk.vector, Filter(), 100)
            assert record.record_id not in {hit.record.record_id for hit in hits}
            rest = [item for item in dataset if item[0] != record]
            self.assert_same(hits, exact_hits(rest, "org-a", record.record_type, chunk.vector, Filter(), 100))
        # The same record id in the other organisation survives.
        hits = await loaded.search("org-b", record.record_type, chunks[0].vector, Filter(), 1)
        assert hits[0].record.record_id == record.record_id

    async def test_record_owners(self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]) -> None:
        wanted = ["rec-001", "rec-007", "rec-unknown"]
        expected = {
            r.record_id: r.user_id for r, _ in dataset if r.organization_id == "org-a" and r.record_id in wanted
        }
        assert await loaded.record_owners("org-a", wanted) == expected
        assert expected == {"rec-001": "user-1", "rec-007": None}
        assert await loaded.record_owners("org-c", wanted) == {}
        assert await loaded.record_owners("org-a", []) == {}

    async def test_delete_matching_user(self, loaded: HistoryStore, dataset: list[tuple[Record, list[Chunk]]]) -> None:
        where = parse_filters([("filter[user_id]", "user-1")])
        doomed = [item for item in dataset if item[0].organization_id == "org-a" and matches(where, item[0])]
        counts = await loaded.delete_matching("org-a", where)
        assert (counts.records, counts.chunks) == (len(doomed), sum(len(c) for _, c in doomed))
        again = await loaded.delete_matching("org-a", where)
        assert (again.records, again.chunks) == (0, 0)
        rest = [item for item in dataset if item not in doomed]
        query = unit(np.random.default_rng(4), 1)[0]
        for org in ORGS:
            for record_type in TYPES:
                hits = await loaded.search(org, record_type, query, Filter(), 100)
                self.assert_same(hits, exact_hits(rest, org, record_type, query, Filter(), 100))
        assert len(await loaded.search("org-b", "message", query, where, 100)) > 0

    async def test_empty_store(self, store: HistoryStore) -> None:
        query = unit(np.random.default_rng(1), 1)[0]
        assert await store.search("org-a", "voice", query, Filter(), 10) == []
        # An OpenSearch store reports its cluster's status, and the cluster is shared with the run's other tests,
        # whose servers may be creating an index right now (yellow until its shards are assigned): green once settled.
        await eventually(lambda: _green(store), "the store reports green")
        assert await store.delete_record("org-a", "nothing") == 0

    # -- keyword search ---------------------------------------------------------------

    @staticmethod
    def timeline(
        texts: Sequence[str], *, user_id: str | None = "u-1", org: str = "org-a"
    ) -> list[tuple[Record, list[Chunk]]]:
        """One user's turns, a minute apart, one chunk each."""
        vectors = unit(np.random.default_rng(11), len(texts))
        return [
            (
                Record(org, f"turn-{i}", "message", "USA", BASE_TIME + timedelta(minutes=i), BASE_TIME, user_id),
                [Chunk(0, 1, text, vectors[i])],
            )
            for i, text in enumerate(texts)
        ]

    @staticmethod
    async def keyword_ids(store: HistoryStore, text: str, org: str = "org-a", where: Filter | None = None) -> list[str]:
        hits = await store.keyword_search(org, "message", text, where or Filter(), 10)
        assert all(a.score >= b.score > 0 for a, b in zip(hits, hits[1:]))
        return [hit.record.record_id for hit in hits]

    async def test_keyword_search_ranks_by_words_and_stems(self, store: HistoryStore) -> None:
        await store.write_records(
            self.timeline(["we went hiking in the mountains", "nothing here", "the painting of a sunset"])
            + self.timeline(["hiking hiking hiking"], user_id="u-2", org="org-b")
        )
        assert await self.keyword_ids(store, "Painted SUNSETS?") == ["turn-2"]
        assert "turn-0" in await self.keyword_ids(store, "hike")
        assert await self.keyword_ids(store, "zebra") == []
        assert await self.keyword_ids(store, "!!! ...") == []
        assert await self.keyword_ids(store, "hiking", org="org-b") == ["turn-0"]
        assert await self.keyword_ids(store, "hiking", org="org-c") == []
        assert await store.keyword_search("org-a", "voice", "hiking", Filter(), 10) == []
        where = parse_filters([("filter[record_id]", "turn-1")])
        assert await self.keyword_ids(store, "mountains nothing", where=where) == ["turn-1"]

    async def test_keyword_words_borrow_the_previous_turn_of_the_same_user(self, store: HistoryStore) -> None:
        turns = self.timeline(["Did you visit Lisbon?", "Yes, twice last summer!", "What about Rome?"])
        # written out of order: the words follow the timeline, not the order of arrival
        await store.write_records([turns[2]])
        await store.write_records([turns[0]])
        await store.write_records([turns[1]])
        assert set(await self.keyword_ids(store, "Lisbon")) == {"turn-0", "turn-1"}
        assert set(await self.keyword_ids(store, "summer")) == {"turn-1", "turn-2"}
        alone = self.timeline(["about Lisbon", "unrelated words"], user_id=None, org="org-b")
        await store.write_records(alone)
        assert await self.keyword_ids(store, "Lisbon", org="org-b") == ["turn-0"]

    async def test_preceding_texts_follow_the_timeline_and_the_batch(self, store: HistoryStore) -> None:
        turns = self.timeline(["Did you visit Lisbon?", "Yes, twice last summer!", "What about Rome?", "Never."])
        await store.write_records([turns[0], turns[3]])
        await store.write_records(self.timeline(["another user's turn"], user_id="u-2", org="org-b"))
        # turns 1 and 2 arrive together, between two stored ones; a record being rewritten is not its own lender
        asked = [(turns[2][0], "What about Rome?"), (turns[1][0], "Yes, twice last summer!"), (turns[3][0], "Never.")]
        minute = 60_000_000
        start = (BASE_TIME - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        assert await store.preceding_texts(asked) == {
            "turn-1": (start, "Did you visit Lisbon?"),
            "turn-2": (start + minute, "Yes, twice last summer!"),
            "turn-3": (start + 2 * minute, "What about Rome?"),
        }
        assert await store.preceding_texts([(turns[0][0], "x")]) == {}
        alone = self.timeline(["no user"], user_id=None)[0][0]
        assert await store.preceding_texts([(replace(alone, record_id="turn-9"), "x")]) == {}
        elsewhere = replace(turns[1][0], organization_id="org-b")
        assert await store.preceding_texts([(elsewhere, "x")]) == {}

    async def test_following_names_the_next_record_of_the_timeline_unless_asked_about(
        self, store: HistoryStore
    ) -> None:
        turns = self.timeline(["zero", "one", "two", "three"])
        await store.write_records(turns)
        await store.write_records(self.timeline(["other"], user_id="u-2", org="org-b"))
        assert await store.following("org-a", ["turn-0"]) == ["turn-1"]
        assert sorted(await store.following("org-a", ["turn-0", "turn-1", "turn-2"])) == ["turn-3"]
        assert sorted(await store.following("org-a", ["turn-0", "turn-2"])) == ["turn-1", "turn-3"]
        assert await store.following("org-a", ["turn-3", "nothing"]) == []
        assert await store.following("org-b", ["turn-1"]) == []  # org-b's turn-0 is all it has
        await store.write_records(self.timeline(["no user"], user_id=None, org="org-c"))
        assert await store.following("org-c", ["turn-0"]) == []

    async def test_a_write_names_the_records_whose_context_it_changed(self, store: HistoryStore) -> None:
        turns = self.timeline(["zero", "one", "two", "three", "four"])
        assert await store.write_records([turns[0], turns[4]]) == []  # each is the other's, and both are written
        assert await store.write_records([turns[3], turns[1]]) == ["turn-4"]  # turn-1's next record is turn-3
        assert sorted(await store.write_records([turns[2], turns[0]])) == ["turn-1", "turn-3"]
        assert await store.write_records([turns[4]]) == []  # rewritten last: nothing follows it
        assert await store.write_records(self.timeline(["no user"], user_id=None, org="org-c")) == []

    async def test_read_records_gives_each_record_with_its_chunks_and_vectors(self, store: HistoryStore) -> None:
        vectors = unit(np.random.default_rng(5), 3)
        record = Record("org-a", "long", "message", "USA", BASE_TIME, BASE_TIME, "u-1", "doc-1", None, {"k": "v"})
        chunks = [Chunk(i, 3, f"part {i}", vectors[i]) for i in range(3)]
        await store.write_records([(record, chunks), *self.timeline(["short"])])
        assert await store.read_records("org-b", ["long"]) == []
        (read,) = await store.read_records("org-a", ["long", "missing"])
        assert read[0] == record
        assert [(c.index, c.total, c.text) for c in read[1]] == [(i, 3, f"part {i}") for i in range(3)]
        for got, sent in zip(read[1], chunks):
            np.testing.assert_allclose(got.vector, sent.vector, atol=1e-6)  # float32 round trip of unit vectors
        assert sorted(r.record_id for r, _ in await store.read_records("org-a", ["long", "turn-0"])) == [
            "long",
            "turn-0",
        ]

    async def test_deleting_a_turn_removes_its_words_from_its_successor(self, store: HistoryStore) -> None:
        turns = self.timeline(["my secret is papaya", "ok noted", "bye"])
        await store.write_records(turns)
        assert set(await self.keyword_ids(store, "papaya")) == {"turn-0", "turn-1"}
        await store.delete_record("org-a", "turn-0")
        assert await self.keyword_ids(store, "papaya") == []
        await store.delete_matching("org-a", parse_filters([("filter[record_id]", "turn-1")]))
        assert await self.keyword_ids(store, "noted") == []
        assert await self.keyword_ids(store, "bye") == ["turn-2"]
        # a rewrite replaces the words its successor borrowed
        await store.write_records(self.timeline(["my secret is papaya", "ok noted", "bye"])[:1])
        assert set(await self.keyword_ids(store, "papaya")) == {"turn-0", "turn-2"}
        changed = self.timeline(["my secret is mango"])
        await store.write_records(changed)
        assert await self.keyword_ids(store, "papaya") == []
        assert set(await self.keyword_ids(store, "mango")) == {"turn-0", "turn-2"}


async def _green(store: HistoryStore) -> bool:
    return (await store.health())["status"] == "green"
