"""Metadata keys as filter columns on the embedded store: exact parity with ``matches``, built late, kept in step.

Truth is :func:`memory_plugin.histories.stores.filters.matches` over the
records written (and SQL, the store's other filter target).  Values mix types
per key on purpose: numbers written as 5 and 5.0, ints float64 cannot hold,
numeric-looking strings, "true"/"false" as strings beside booleans, unicode
that case folding changes, empty strings.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_plugin.histories.stores.filters import OPERATORS, Condition, Filter, matches, parse_filters
from memory_plugin.histories.stores.metadata_columns import KeyColumn
from memory_plugin.histories.stores.records import Chunk, Record
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore
from memory_plugin.histories.stores.sqlite_tables import hit_rows, hits
from tests.support.store_contract import DIM, unit

NOW = datetime(2026, 3, 1, tzinfo=UTC)
KEYS = ("lang", "n", "flag", "mixed", "rare")
VALUES: list[Any] = [
    "en", "EN", "", "5", "5.0", "true", "false", "True", "Über", "über", "ÜBER", "straße", "STRASSE", "ß", "İ",
    "日本語", "a,b", "10", "9", "b", 5, 5.0, -0.0, 0, 7.5, -3, 10, 1e20, 2**53, 2**53 + 1, 2**60, 10**30, -(2**70),
    True, False,
]  # fmt: skip
EXPECTED = [
    "en", "EN", "", "5", "5.0", "05", "+5", "-0", "0", "1e1", "10", "7.5", ".5", "true", "false", "True", "über",
    "ÜBER", "ss", "SS", "straße", "i̇", "日本", "b", "9", "9007199254740992", "9007199254740993", "1e30", "-3.0",
    "1e20", "1152921504606846976", "x",
]  # fmt: skip


def random_metadata(rng: random.Random, keys: tuple[str, ...] = KEYS) -> dict[str, Any]:
    metadata = {key: rng.choice(VALUES) for key in keys if rng.random() < 0.8}
    if rng.random() < 0.03:
        metadata["rare"] = rng.choice(VALUES)
    else:
        metadata.pop("rare", None)
    return metadata


def random_condition(rng: random.Random, keys: tuple[str, ...] = KEYS) -> Condition:
    op = rng.choice(OPERATORS)
    count = rng.randint(1, 5) if op == "in" else 1
    return Condition(f"metadata.{rng.choice(keys)}", op, tuple(rng.choice(EXPECTED) for _ in range(count)))


@pytest.mark.slow
def test_key_column_positions_are_matches_exactly() -> None:
    """Thousands of random conditions over mixed-type values: the column's positions are the reference's."""
    rng = random.Random(5)
    column = KeyColumn()
    values: list[Any] = []
    for _ in range(3):  # appended in batches, as writes do
        batch = [rng.choice([*VALUES, None, "absent"]) for _ in range(150)]
        start = len(values)
        present = [(start + i, v) for i, v in enumerate(batch) if v != "absent"]
        column.add([p for p, _ in present], [v for _, v in present])
        values += batch
    records = [
        Record("o", f"r{i}", "voice", "USA", NOW, NOW, metadata={} if v == "absent" else {"k": v})
        for i, v in enumerate(values)
    ]
    checked = 0
    for op in OPERATORS:
        for expected in [(e,) for e in EXPECTED] + [tuple(rng.sample(EXPECTED, 5)) for _ in range(40)]:
            condition = Condition("metadata.k", op, expected)
            truth = [i for i, r in enumerate(records) if values[i] is not None and matches(Filter((condition,)), r)]
            assert column.positions(op, expected, len(values)).tolist() == truth, (op, expected)
            checked += bool(truth)
    assert checked > 100  # most conditions match something: the comparison is not vacuous
    assert column.positions("eq", ("5",), 225).max() < 225  # a reader with an older size sees only its rows


def test_a_condition_asked_again_after_writes_sees_the_new_values() -> None:
    """Answers are kept per condition and extended by the values added since: after each batch they are exact."""
    rng = random.Random(11)
    column = KeyColumn()
    values: list[Any] = []
    conditions = [(op, tuple(rng.sample(EXPECTED, rng.randint(1, 3)))) for op in OPERATORS for _ in range(4)]
    grew = 0
    for _ in range(6):
        batch = [rng.choice([*VALUES, None, "absent"]) for _ in range(rng.randint(1, 120))]
        start = len(values)
        present = [(start + i, v) for i, v in enumerate(batch) if v != "absent"]
        column.add([p for p, _ in present], [v for _, v in present])
        values += batch
        records = [Record("o", f"r{i}", "voice", "USA", NOW, NOW, metadata={"k": v}) for i, v in enumerate(values)]
        for op, expected in conditions:
            condition = Filter((Condition("metadata.k", op, expected),))
            truth = [i for i, r in enumerate(records) if values[i] not in (None, "absent") and matches(condition, r)]
            before = len(column.positions(op, expected, start))
            assert column.positions(op, expected, len(values)).tolist() == truth, (op, expected)
            assert column.positions(op, expected, start).tolist() == truth[:before]  # an older reader's rows
            grew += len(truth) > before
        for first, second in zip(conditions, conditions[7:]):  # two on the key at once: one answer, kept
            both = Filter((Condition("metadata.k", *first), Condition("metadata.k", *second)))
            truth = [i for i, r in enumerate(records) if values[i] not in (None, "absent") and matches(both, r)]
            assert column.positions_all((first, second), len(values)).tolist() == truth, (first, second)
    assert grew > 20  # the kept answers did grow: the tails were evaluated
    assert len(column._found) == len(set(conditions)) + len(conditions) - 7  # and were kept, not started over


async def write_random(
    store: SqliteHistoryStore, rng: random.Random, start: int, count: int, keys: tuple[str, ...] = KEYS
) -> list[tuple[Record, list[Chunk]]]:
    vectors = unit(np.random.default_rng(start), count * 2)
    items = []
    for i in range(start, start + count):
        record = Record(
            f"org-{i % 2}", f"r{i}", "voice", "USA", NOW, NOW,
            user_id=f"u{i % 3}", metadata=random_metadata(rng, keys),
        )  # fmt: skip
        chunks = [Chunk(j, 1 + i % 2, f"t{i}", vectors[(i - start) * 2 + j]) for j in range(1 + i % 2)]
        items.append((record, chunks))
    await store.write_records(items)
    return items


def chunk_ids(items: list[tuple[Record, list[Chunk]]], where: Filter, org: str) -> set[str]:
    return {
        f"{record.record_id}_chunk_{chunk.index}"
        for record, chunks in items
        if record.organization_id == org and matches(where, record)
        for chunk in chunks
    }


async def found(store: SqliteHistoryStore, where: Filter, org: str) -> set[str]:
    query = unit(np.random.default_rng(1), 1)[0]
    return {hit.id for hit in await store.search(org, "voice", query, where, 10_000)}


async def column_chunk_ids(store: SqliteHistoryStore, where: Filter, org: str) -> set[str]:
    """The chunks the columns select for ``where`` (its keys built first), by their record and index."""
    index = store._indexes["voice"]
    await store._keep_metadata(index, "voice", [c.field[9:] for c in where.conditions if c.is_metadata])
    mask, _ = index.org_positions(store._org_codes[org])
    _, positions = index.columns.select(where, index.n, mask)
    chunks = [int(chunk) for chunk in index.ids[positions]]
    rows = await store._db.read(partial(hit_rows, chunk_ids=chunks))
    return {hit.id for hit in hits([(chunk, 0.0) for chunk in chunks], rows)}


@pytest.mark.parametrize("exact_threshold", [20_000, pytest.param(0, marks=pytest.mark.slow)])
async def test_random_metadata_filters_match_reference(tmp_path: Path, exact_threshold: int) -> None:
    """Random mixed-type records, random metadata filters (alone and with top-level ones): hits == brute force."""
    rng = random.Random(11)
    store = SqliteHistoryStore(tmp_path / "cols", exact_threshold=exact_threshold, ef_search=512)
    sql = SqliteHistoryStore(tmp_path / "sql", filter_target="sql")
    await store.open(DIM)
    await sql.open(DIM)
    try:
        items = await write_random(store, random.Random(3), 0, 400)
        await write_random(sql, random.Random(3), 0, 400)
        nonempty = 0
        for round_ in range(150):
            conditions = [random_condition(rng) for _ in range(rng.randint(1, 3))]
            if round_ % 4 == 0:
                conditions.append(Condition("user_id", "in", ("u0", "u2")))
            where = Filter(tuple(conditions))
            org = f"org-{round_ % 2}"
            truth = chunk_ids(items, where, org)
            nonempty += bool(truth)
            assert await column_chunk_ids(store, where, org) == truth, where
            if round_ % 5 == 0:  # whole searches (HNSW with the selector when exact_threshold is 0)
                assert await found(store, where, org) == truth, where
            assert await found(sql, where, org) == truth, where  # SQL too, ints beyond float64 included
        assert nonempty > 60
        assert set(store._indexes["voice"].columns.metadata.columns) <= set(KEYS)
    finally:
        await store.close()
        await sql.close()


@pytest.mark.slow
async def test_key_first_seen_after_many_writes(tmp_path: Path) -> None:
    """A key nobody wrote for thousands of records, then some: the first filter naming it finds them all at once."""
    store = SqliteHistoryStore(tmp_path)
    await store.open(DIM)
    try:
        rng = random.Random(2)
        items: list[tuple[Record, list[Chunk]]] = []
        for start in range(0, 3000, 500):
            items += await write_random(store, rng, start, 500, keys=("lang", "n"))
        items += await write_random(store, rng, 3000, 300, keys=("late",))
        index = store._indexes["voice"]
        assert "late" not in index.columns.metadata.columns
        for params in (
            [("filter[late]", "5")],
            [("filter[late][contains]", "E")],
            [("filter[late][gte]", "0"), ("filter[user_id]", "u1")],
        ):
            where = parse_filters(params)
            truth = chunk_ids(items, where, "org-0")
            assert truth, params
            assert await found(store, where, "org-0") == truth
        assert "late" in index.columns.metadata.columns
        # written after the column exists: kept in step without another pass
        items += await write_random(store, rng, 3300, 60, keys=("late", "lang"))
        where = parse_filters([("filter[late][in]", "true,5,en,Über")])
        assert await found(store, where, "org-1") == chunk_ids(items, where, "org-1")
    finally:
        await store.close()


async def test_replaces_and_deletes_update_the_columns(tmp_path: Path) -> None:
    """Built columns, then records rewritten with other metadata (other types), deleted one by one and by filter."""
    store = SqliteHistoryStore(tmp_path)
    await store.open(DIM)
    try:
        rng = random.Random(4)
        items = await write_random(store, rng, 0, 200)
        wheres = [Filter((random_condition(rng),)) for _ in range(60)]
        for where in wheres:  # builds the columns
            assert await found(store, where, "org-0") == chunk_ids(items, where, "org-0")
        current = {record.record_id: (record, chunks) for record, chunks in items}
        rewritten = [(replace(record, metadata=random_metadata(rng)), chunks) for record, chunks in items[::3]]
        await store.write_records(rewritten)
        current.update({record.record_id: (record, chunks) for record, chunks in rewritten})
        for record_id in list(current)[1::7]:
            record, _ = current.pop(record_id)
            await store.delete_record(record.organization_id, record_id)
        gone = parse_filters([("filter[lang][in]", "en,5")])
        await store.delete_matching("org-0", gone)
        survivors = [
            item for item in current.values() if not (item[0].organization_id == "org-0" and matches(gone, item[0]))
        ]
        for where in [*wheres, gone]:
            for org in ("org-0", "org-1"):
                assert await found(store, where, org) == chunk_ids(survivors, where, org), where
        assert not await found(store, gone, "org-0")
    finally:
        await store.close()


async def test_keys_are_bounded_least_recently_used(tmp_path: Path) -> None:
    """At most ``metadata_columns`` keys are kept; a filter naming more goes to SQL; searches racing for keys agree."""
    store = SqliteHistoryStore(tmp_path, metadata_columns=2)
    await store.open(DIM)
    try:
        rng = random.Random(8)
        items = await write_random(store, rng, 0, 300)
        kept = store._indexes["voice"].columns.metadata
        for key in ("lang", "n", "flag", "lang"):
            where = parse_filters([(f"filter[{key}]", "5")])
            assert await found(store, where, "org-0") == chunk_ids(items, where, "org-0")
        assert list(kept.columns) == ["flag", "lang"]  # n, the least recently used, was dropped
        three = parse_filters([("filter[lang]", "en"), ("filter[n][gte]", "0"), ("filter[mixed][lt]", "z")])
        assert await found(store, three, "org-1") == chunk_ids(items, three, "org-1")  # on SQL
        assert list(kept.columns) == ["flag", "lang"]
        wheres = [Filter((random_condition(rng),)) for _ in range(40)]
        results = await asyncio.gather(*(found(store, where, "org-0") for where in wheres))
        for where, result in zip(wheres, results):
            assert result == chunk_ids(items, where, "org-0"), where
        assert len(kept.columns) <= 2
        unknown = parse_filters([("filter[never-written]", "x")])
        assert await found(store, unknown, "org-0") == set()
        assert kept.columns["never-written"].nbytes < 1024  # a key without values is cheap
    finally:
        await store.close()


def test_embedded_region_settings_reach_the_store(tmp_path: Path) -> None:
    """``[regions.X] metadata_columns`` and ``filter_cache_mb`` reach the store; nonsense is refused at start."""
    from memory_plugin.histories.stores import open_histories_store
    from memory_plugin.settings import load_settings

    config = tmp_path / "config.toml"
    config.write_text('[regions.USA]\nstore = "embedded"\nmetadata_columns = 3\n')
    settings = load_settings(config, environ={}, data_dir=tmp_path)
    store = open_histories_store(settings, "USA")
    assert isinstance(store, SqliteHistoryStore) and store._options[-2:] == (3, 256 << 20)
    config.write_text('[regions.USA]\nstore = "embedded"\nmetadata_columns = 0\n')
    with pytest.raises(ValueError, match="metadata_columns must be a positive integer"):
        load_settings(config, environ={}, data_dir=tmp_path)
    config.write_text('[regions.USA]\nstore = "embedded"\nfilter_cache_mb = 0\n')
    store = open_histories_store(load_settings(config, environ={}, data_dir=tmp_path), "USA")
    assert isinstance(store, SqliteHistoryStore) and store._options[-1] == 0
    for nonsense in ("-1", "true", '"64"', "2.5"):
        config.write_text(f'[regions.USA]\nstore = "embedded"\nfilter_cache_mb = {nonsense}\n')
        with pytest.raises(ValueError, match="filter_cache_mb must be an integer"):
            load_settings(config, environ={}, data_dir=tmp_path)


@pytest.mark.parametrize("write_when", ["before the pass", "after the pass"])
async def test_writes_during_a_build_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_when: str) -> None:
    """Writes land while a key's column is built (before or after its SQLite pass reads): each chunk once, none lost."""
    import threading

    from memory_plugin.histories.stores import sqlite as sqlite_module

    store = SqliteHistoryStore(tmp_path)
    await store.open(DIM)
    rng = random.Random(6)
    items = await write_random(store, rng, 0, 200)
    reading, written = threading.Event(), threading.Event()
    original = sqlite_module.metadata_values

    def held(*args: Any, **kwargs: Any) -> Any:
        reading.set()
        if write_when == "before the pass":
            assert written.wait(60)
        result = original(*args, **kwargs)
        if write_when == "after the pass":
            assert written.wait(60)
        return result

    monkeypatch.setattr(sqlite_module, "metadata_values", held)
    try:
        wheres = [parse_filters([("filter[lang][in]", "en,5,true,Über")]), parse_filters([("filter[lang]", "Über")])]
        search = asyncio.ensure_future(found(store, wheres[0], "org-0"))
        await asyncio.get_running_loop().run_in_executor(None, reading.wait, 60)
        items += await write_random(store, rng, 200, 100)  # committed and indexed while the key is pending
        written.set()
        assert await search == chunk_ids(items, wheres[0], "org-0")
        query = unit(np.random.default_rng(1), 1)[0]
        for where in wheres:  # broad (a mask) and selective (positions seed the search)
            hits = [hit.id for hit in await store.search("org-0", "voice", query, where, 10_000)]
            assert len(hits) == len(set(hits))  # no position twice
            assert set(hits) == chunk_ids(items, where, "org-0")
            assert any(int(hit.split("_")[0][1:]) >= 200 for hit in hits)
        items += await write_random(store, rng, 300, 50)
        for where in wheres:
            assert await found(store, where, "org-0") == chunk_ids(items, where, "org-0")
        assert not store._indexes["voice"].columns.metadata.pending
    finally:
        written.set()
        await store.close()
