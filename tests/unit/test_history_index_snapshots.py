"""Reopening the embedded history store from its snapshot (``index_snapshots``): fast, and never wrong.

Each test compares the reopened store with brute force over what SQLite holds,
and checks *how* it was loaded (``load_report``): the snapshot when it is sound,
the full check against SQLite when anything disagrees.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memory_plugin.histories.stores import sqlite as sqlite_store
from memory_plugin.histories.stores.filters import Filter, parse_filters
from memory_plugin.histories.stores.records import Chunk
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

ROOT = Path(__file__).resolve().parents[2]


def folders(path: Path, record_type: str = "voice") -> list[Path]:
    return sorted(folder for folder in path.glob(f"hnsw-{record_type}.*") if folder.is_dir())


def log_size(path: Path) -> int:
    with sqlite3.connect(path / "store.sqlite3") as connection:
        count: int = connection.execute("SELECT count(*) FROM deleted_chunks").fetchone()[0]
    return count


async def reopened(path: Path, **options: int) -> SqliteHistoryStore:
    store = SqliteHistoryStore(path, **options)  # type: ignore[arg-type]
    await store.open(DIM)
    return store


async def test_reopen_maps_the_snapshot_and_matches_a_rebuild(tmp_path: Path) -> None:
    store = await reopened(tmp_path)
    await store.write_records(make_dataset())
    survivors = await replace_and_delete(store, make_dataset())
    await store.close()
    assert log_size(tmp_path) == 0, "a snapshot covering every delete trims the log"

    fast = await reopened(tmp_path, exact_threshold=0, ef_search=256)
    try:
        assert fast.load_report == {"voice": "snapshot", "message": "snapshot"}
        assert set(fast._snapshots.owning) == {
            "voice",
            "message",
        }  # nothing written since: mapped, read into memory later
        await StoreContract().assert_filters_match(fast, survivors)
        # a write waits for the graph read into memory, then is searchable at once
        record, chunks = make_dataset(seed=99, per_org=1)[0]
        record = replace(record, record_id="rec-new")
        await fast.write_records([(record, chunks)])
        assert not fast._indexes[record.record_type].mapped
        hits = await fast.search(record.organization_id, record.record_type, chunks[0].vector, Filter(), 1)
        assert [hit.record.record_id for hit in hits] == [record.record_id]
        await StoreContract().assert_filters_match(fast, [*survivors, (record, chunks)])
    finally:
        await fast.close()

    fast = await reopened(tmp_path)
    for folder in tmp_path.glob("hnsw-*"):
        shutil.rmtree(folder)
    rebuilt = await reopened(tmp_path)
    try:
        assert set(rebuilt.load_report.values()) == {"rebuilt (no snapshot)"}
        query = unit(np.random.default_rng(4), 1)[0]
        for org in ("org-a", "org-b"):
            for record_type in ("voice", "message"):
                assert as_pairs(await fast.search(org, record_type, query, Filter(), 100)) == as_pairs(
                    await rebuilt.search(org, record_type, query, Filter(), 100)
                )
    finally:
        await fast.close()
        await rebuilt.close()


async def test_deletes_after_the_snapshot_stay_dead(tmp_path: Path) -> None:
    """Deletes only (the graph stays mapped), of chunks the snapshot holds, then a crash."""
    dataset = make_dataset()
    crashed = await reopened(tmp_path)
    await crashed.write_records(dataset)
    await crashed.snapshot()
    gone = {"rec-001", "rec-004", "rec-007"}
    for record_id in gone:
        assert await crashed.delete_record("org-a", record_id) > 0
    await crashed._db.close()  # SIGKILL: no close(), no snapshot of the deletes
    assert log_size(tmp_path) == sum(
        len(chunks) for record, chunks in dataset if record.organization_id == "org-a" and record.record_id in gone
    )

    store = await reopened(tmp_path)
    try:
        assert set(store.load_report.values()) == {"snapshot"}
        assert set(store._snapshots.owning) == {"voice", "message"}
        survivors = [item for item in dataset if not (item[0].organization_id == "org-a" and item[0].record_id in gone)]
        await StoreContract().assert_filters_match(store, survivors)
        index = store._indexes["voice"]
        assert (index.orgs[: index.n] >= 0).sum() == sum(
            len(chunks) for record, chunks in survivors if record.record_type == "voice"
        )
    finally:
        await store.close()


async def test_organisation_codes_are_mapped_to_the_new_process(tmp_path: Path) -> None:
    """Codes are per process: a snapshot's codes are translated by name, whatever order orgs are met in."""
    dataset = make_dataset()
    voice = [item for item in dataset if item[0].record_type == "voice"]
    message_b = [item for item in dataset if item[0].record_type == "message" and item[0].organization_id == "org-b"]
    crashed = await reopened(tmp_path)
    await crashed.write_records(voice)  # org-a gets code 0, org-b code 1
    await crashed.snapshot()
    await crashed.write_records(message_b)  # no snapshot: "message" is rebuilt first and meets org-b first
    await crashed._db.close()

    store = await reopened(tmp_path)
    try:
        assert store.load_report == {"voice": "snapshot", "message": "rebuilt (no snapshot)"}
        assert store._org_codes["org-b"] == 0
        await StoreContract().assert_filters_match(store, [*voice, *message_b])
    finally:
        await store.close()


def _damage(kind: str, path: Path, older: Path) -> None:
    folder = folders(path)[-1]
    if kind == "truncated graph":
        data = (folder / "index.faiss").read_bytes()
        (folder / "index.faiss").write_bytes(data[: len(data) // 2])
    elif kind == "truncated state":
        data = (folder / "state.npz").read_bytes()
        (folder / "state.npz").write_bytes(data[:-100])
    elif kind == "corrupt state":
        data = bytearray((folder / "state.npz").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (folder / "state.npz").write_bytes(bytes(data))
    elif kind == "corrupt meta":
        text = (folder / "meta.json").read_text()
        (folder / "meta.json").write_text(text.replace('"format', '"formal'))
    elif kind == "older than the mark":
        shutil.rmtree(folder)
        shutil.copytree(older, folder)


@pytest.mark.parametrize(
    "kind", ["truncated graph", "truncated state", "corrupt state", "corrupt meta", "older than the mark"]
)
async def test_a_damaged_snapshot_is_checked_against_sqlite(tmp_path: Path, kind: str) -> None:
    dataset = make_dataset()
    store = await reopened(tmp_path / "store")
    await store.write_records(dataset[:40])
    await store.snapshot()
    shutil.copytree(folders(tmp_path / "store")[-1], tmp_path / "older")
    await store.write_records(dataset[40:])
    survivors = await replace_and_delete(store, dataset)
    await store.close()
    _damage(kind, tmp_path / "store", tmp_path / "older")

    checked = await reopened(tmp_path / "store", exact_threshold=0, ef_search=256)
    try:
        assert checked.load_report["message"] == "snapshot"
        assert checked.load_report["voice"] != "snapshot"
        assert checked.load_report["voice"].startswith(("snapshot checked against the database (", "rebuilt ("))
        await StoreContract().assert_filters_match(checked, survivors)
    finally:
        await checked.close()
    again = await reopened(tmp_path / "store")  # close() wrote a sound snapshot in its place
    try:
        assert set(again.load_report.values()) == {"snapshot"}
        await StoreContract().assert_filters_match(again, survivors)
    finally:
        await again.close()


async def test_the_log_holds_what_no_snapshot_covers(tmp_path: Path) -> None:
    """The trigger logs cascaded deletes in their transaction; a snapshot of every type trims them."""
    dataset = make_dataset()
    store = await reopened(tmp_path)
    await store.write_records(dataset)
    await store.snapshot()
    chunks = await store.delete_record("org-a", "rec-000")
    replaced, old_chunks = dataset[5]
    await store.write_records([(replaced, [Chunk(0, 1, "new", unit(np.random.default_rng(1), 1)[0])])])
    assert log_size(tmp_path) == chunks + len(old_chunks)
    await store.snapshot()
    assert log_size(tmp_path) == 0
    hits = await store.search("org-a", replaced.record_type, unit(np.random.default_rng(1), 1)[0], Filter(), 100)
    assert [hit.text for hit in hits if hit.record.record_id == replaced.record_id] == ["new"]
    expected = [
        item
        for item in dataset
        if item[0].organization_id == "org-b" or item[0].record_id not in ("rec-000", replaced.record_id)
    ]
    expected.append((replaced, [Chunk(0, 1, "new", unit(np.random.default_rng(1), 1)[0])]))
    want = exact_hits(expected, "org-a", replaced.record_type, unit(np.random.default_rng(1), 1)[0], Filter(), 100)
    assert [hit_id for hit_id, _ in as_pairs(hits)] == [hit_id for hit_id, _ in want]
    await store.close()
    # the type with deletes only got a new snapshot sharing the old graph file, not a copy of it
    again = await reopened(tmp_path)
    try:
        assert set(again.load_report.values()) == {"snapshot"}
        assert all((folders(tmp_path, kind)[0] / "index.faiss").stat().st_nlink == 1 for kind in ("voice", "message"))
        await StoreContract().assert_filters_match(again, expected)
    finally:
        await again.close()


async def test_odd_strings_survive_the_snapshot(tmp_path: Path) -> None:
    """Field values with a NUL (JSON allows it) or beyond ASCII come back exactly, and filter exactly."""
    record, chunks = make_dataset(per_org=1)[0]
    odd = [
        replace(record, record_id=f"odd-{i}", user_id=user, metadata={"label": user, "big": 2**70 * (i + 1) + 1})
        for i, user in enumerate(["a\x00b", "a", "Über"])
    ]
    store = await reopened(tmp_path)
    await store.write_records([(item, chunks) for item in odd])
    for item in odd:  # the metadata keys are kept as columns, then saved with the snapshot
        where = parse_filters([("filter[label]", item.user_id or ""), ("filter[big][gte]", str(2**70))])
        assert len(await store.search(item.organization_id, item.record_type, chunks[0].vector, where, 10)) == 1
    await store.close()
    again = await reopened(tmp_path)
    try:
        assert set(again.load_report.values()) == {"snapshot"}
        assert list(again._indexes[record.record_type].columns.metadata.columns) == ["label", "big"]
        for i, item in enumerate(odd):  # big: ints float64 cannot hold, kept aside exactly
            for where in (
                parse_filters([("filter[user_id]", item.user_id or "")]),
                parse_filters([("filter[label]", item.user_id or "")]),
                parse_filters([("filter[label]", item.user_id or ""), ("filter[big][gte]", str(2**70 * (i + 1)))]),
            ):
                hits = await again.search(item.organization_id, item.record_type, chunks[0].vector, where, 10)
                assert [hit.record.record_id for hit in hits] == [item.record_id]
    finally:
        await again.close()


async def test_a_record_type_deleted_whole_loses_its_snapshot(tmp_path: Path) -> None:
    """Its mark would hold the delete log back forever: open() drops mark and folder."""
    dataset = make_dataset()
    store = await reopened(tmp_path)
    await store.write_records(dataset)
    await store.close()
    store = await reopened(tmp_path)
    await store.delete_matching("org-a", parse_filters([("filter[record_type]", "message")]))
    await store.delete_matching("org-b", parse_filters([("filter[record_type]", "message")]))
    await store._db.close()  # crash: the log holds the deletes
    assert log_size(tmp_path) > 0
    again = await reopened(tmp_path)
    try:
        assert again.load_report == {"voice": "snapshot"}
        assert folders(tmp_path, "message") == []
        await again.snapshot()
        assert log_size(tmp_path) == 0
        await StoreContract().assert_filters_match(again, [item for item in dataset if item[0].record_type == "voice"])
    finally:
        await again.close()


async def test_metadata_columns_come_back_with_the_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a clean close the kept metadata keys reopen with the snapshot, without a pass over SQLite each;
    after chunks written since the snapshot (a crash), they are built again when named, and stay exact."""
    store = await reopened(tmp_path)
    await store.write_records(make_dataset())
    survivors = await replace_and_delete(store, make_dataset())
    await store.snapshot()  # the keys are kept after it: the close saves them, though nothing was written since
    await StoreContract().assert_filters_match(store, survivors)  # every metadata key the cases name is kept
    kept = {name: list(index.columns.metadata.columns) for name, index in store._indexes.items()}
    assert all(len(keys) >= 2 for keys in kept.values())
    await store.close()

    passes: list[str] = []
    metadata_values = sqlite_store.metadata_values
    monkeypatch.setattr(
        sqlite_store, "metadata_values", lambda *a, **kw: passes.append(kw["path"]) or metadata_values(*a, **kw)
    )
    fast = await reopened(tmp_path)
    try:
        assert set(fast.load_report.values()) == {"snapshot"}
        assert {name: list(index.columns.metadata.columns) for name, index in fast._indexes.items()} == kept
        await StoreContract().assert_filters_match(fast, survivors)
        assert passes == []
        record, chunks = make_dataset(seed=5, per_org=1)[0]
        added = (replace(record, record_id="rec-after", metadata={"language": "en", "score": 1}), chunks)
        await fast.write_records([added])
        await fast._db.close()  # SIGKILL: the chunk is in SQLite, not in a snapshot
    finally:
        if fast._db.is_open:
            await fast.close()

    crashed = await reopened(tmp_path)
    try:
        assert crashed.load_report[record.record_type] == "snapshot"
        assert not crashed._indexes[record.record_type].columns.metadata.columns  # no values of the new chunk
        await StoreContract().assert_filters_match(crashed, [*survivors, added])
        assert passes  # built again from SQLite, as a key seen for the first time
    finally:
        await crashed.close()
