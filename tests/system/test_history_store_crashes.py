"""The embedded history store killed mid-write or mid-snapshot (a real process, SIGKILLed): nothing
acknowledged is lost, and one consistent snapshot is left.  The store's other snapshot and crash-recovery
tests, which need no process of their own, are in tests/unit (test_history_index_snapshots.py and
test_sqlite_history_store.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory_plugin.histories.stores.filters import Filter
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore
from tests.support.store_contract import DIM, StoreContract, as_pairs, exact_hits, make_dataset, unit
from tests.unit.test_history_index_snapshots import folders, reopened

ROOT = Path(__file__).resolve().parents[2]


_CRASHING_SNAPSHOT = """
import asyncio, os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from memory_plugin.histories.stores import snapshot_keeper, sqlite
from tests.support.store_contract import DIM, make_dataset

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

async def main():
    dataset = make_dataset()
    store = sqlite.SqliteHistoryStore(Path({folder!r}))
    await store.open(DIM)
    await store.write_records(dataset[:40])
    await store.snapshot()
    await store.write_records(dataset[40:])
    await store.delete_record("org-a", "rec-002")
    setattr(snapshot_keeper, {step!r}, die)
    await store.snapshot()

asyncio.run(main())
"""


@pytest.mark.parametrize("step", ["commit_mark", "remove_other_snapshots"])
async def test_a_crash_while_snapshotting_leaves_one_consistent_snapshot(tmp_path: Path, step: str) -> None:
    """Killed after the new files are written but before the mark moves, or after it moved but before cleanup."""
    code = _CRASHING_SNAPSHOT.format(root=str(ROOT), folder=str(tmp_path), step=step)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=300)
    assert result.returncode == -9
    assert len(folders(tmp_path)) == 2, "the old and the new snapshot are both on disk"
    dataset = [item for item in make_dataset() if (item[0].organization_id, item[0].record_id) != ("org-a", "rec-002")]
    store = await reopened(tmp_path)
    try:
        assert set(store.load_report.values()) == {"snapshot"}
        assert len(folders(tmp_path)) == 1, "the snapshot the mark does not name is removed"
        # before the mark moved, the old snapshot is used and the rest is read from SQLite (not mapped)
        assert len(store._snapshots.owning) == (step == "remove_other_snapshots")
        await StoreContract().assert_filters_match(store, dataset)
    finally:
        await store.close()


_KILLED_WRITER = """
import asyncio, os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore
from tests.support.store_contract import DIM, make_dataset

async def main():
    dataset = make_dataset()
    store = SqliteHistoryStore(Path({folder!r}))
    await store.open(DIM)
    await store.write_records(dataset[:30])
    await store.snapshot()
    await store.write_records(dataset[30:])
    await store.delete_record("org-a", "rec-005")
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


async def test_survives_sigkill(tmp_path: Path) -> None:
    """A process killed after acknowledged writes loses none of them."""
    code = _KILLED_WRITER.format(root=str(ROOT), folder=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=120)
    assert result.returncode == -9
    dataset = [item for item in make_dataset() if (item[0].organization_id, item[0].record_id) != ("org-a", "rec-005")]
    store = SqliteHistoryStore(tmp_path)
    await store.open(DIM)
    try:
        assert set(store.load_report.values()) == {"snapshot"}
        assert (await store.health())["records"] == len(dataset)
        query = unit(np.random.default_rng(6), 1)[0]
        for org in ("org-a", "org-b"):
            hits = await store.search(org, "voice", query, Filter(), 100)
            assert [h for h, _ in as_pairs(hits)] == [
                h for h, _ in exact_hits(dataset, org, "voice", query, Filter(), 100)
            ]
    finally:
        await store.close()
