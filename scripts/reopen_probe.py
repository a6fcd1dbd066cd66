"""Probe of the embedded history store's restart: reopen from the snapshot, clean and after a crash.

A developer's probe, not a benchmark: ``bench_search.py`` reports the clean reopen
(``reopen_s``) beside its searches; this one also times the crash path by hand.

    PYTHONPATH=. python scripts/reopen_probe.py build FOLDER N   # N random 384-dim chunks (10 orgs), then close
    PYTHONPATH=. python scripts/reopen_probe.py reopen FOLDER    # time open() (prints how each index was loaded)
    PYTHONPATH=. python scripts/reopen_probe.py crash FOLDER     # 1000 writes, 100 deletes after the snapshot; SIGKILL

Building goes through ``write_records`` (the HNSW graph grows as in production:
about 10 minutes per 100k chunks on 2 shared cores); a store built by
``bench_search.py`` (``<folder>/embedded``) can be timed too.  Timing only
covers ``open()``: the graph read into memory after a clean reopen happens in
the background.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from memory_plugin.histories.stores.records import Chunk, Record
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore

DIM = 384
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def records(start: int, vectors: np.ndarray, org: str | None = None) -> list[tuple[Record, list[Chunk]]]:
    return [
        (
            Record(
                organization_id=org or f"org-{i % 10}",
                record_id=f"r{start + i}",
                record_type="voice",
                region="usa",
                record_created_at=NOW,
                ingested_at=NOW,
                user_id=f"user-{(start + i) % 1000}",
                metadata={"language": "en" if i % 3 else "fr"},
            ),
            [Chunk(0, 1, f"text {start + i}", vector)],
        )
        for i, vector in enumerate(vectors)
    ]


async def build(folder: Path, size: int) -> None:
    rng = np.random.default_rng(1)
    store = SqliteHistoryStore(folder, snapshot_every=10**9)
    await store.open(DIM)
    for start in range(0, size, 2000):
        await store.write_records(
            records(start, rng.standard_normal((min(2000, size - start), DIM)).astype(np.float32))
        )
    await store.close()


async def reopen(folder: Path) -> None:
    started = time.perf_counter()
    store = SqliteHistoryStore(folder)
    await store.open(DIM)
    print(f"reopen {time.perf_counter() - started:.2f} s {store.load_report}", flush=True)
    await store.close()


async def crash(folder: Path) -> None:
    store = SqliteHistoryStore(folder)
    await store.open(DIM)
    vectors = np.random.default_rng(5).standard_normal((1000, DIM)).astype(np.float32)
    await store.write_records(records(10**9, vectors, org="org-crash"))
    for i in range(100):
        await store.delete_record("org-crash", f"r{10**9 + i}")
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    if command == "build":
        asyncio.run(build(folder, int(sys.argv[3])))
    else:
        asyncio.run(reopen(folder) if command == "reopen" else crash(folder))
