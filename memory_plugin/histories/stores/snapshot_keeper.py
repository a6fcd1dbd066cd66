"""The snapshots of one embedded store's indexes: loaded at open, written on close and every so many adds.

Split from ``sqlite`` (the store) so that each stays readable; the format and
its checks are ``index_snapshots``.  A graph loaded memory-mapped is read into
memory in the background (``own``); writes wait for it (``owned``) before
they commit, because a mapped graph cannot grow.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import partial
from hashlib import sha1
from pathlib import Path
from typing import Any, TypeVar

from memory_plugin.histories.stores.index_snapshots import (
    Mark,
    changes_since,
    commit_mark,
    deleted_seq,
    folder_of,
    org_table,
    read_marks,
    read_snapshot,
    remove_other_snapshots,
    restore,
    write_snapshot,
)
from memory_plugin.histories.stores.sqlite_tables import load_chunks
from memory_plugin.histories.stores.vector_index import IndexParams, TypeIndex
from memory_plugin.sqlite import Database

T = TypeVar("T")


def file_base(folder: Path, record_type: str) -> Path:
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", record_type):
        return folder / f"hnsw-{record_type}"
    return folder / f"hnsw-{sha1(record_type.encode()).hexdigest()[:16]}"


class SnapshotKeeper:
    """Which snapshot each index was loaded from or saved to (its mark), and the mapped graphs being read."""

    def __init__(
        self,
        path: Path,
        db: Database,
        offload: Callable[..., Awaitable[Any]],
        org_code: Callable[[str], int],
        org_names: Callable[[], list[str]],
    ) -> None:
        self.path, self._db, self._offload = path, db, offload
        self._org_code, self._org_names = org_code, org_names
        #: The snapshot mark of each index saved or loaded (``index_snapshots``).
        self.marks: dict[str, Mark] = {}
        #: The reads of the memory-mapped graphs into memory, per record type (``own``).
        self.owning: dict[str, asyncio.Future[None]] = {}

    async def load_all(self, params: IndexParams, record_types: list[str]) -> dict[str, tuple[TypeIndex, str]]:
        """Each record type's index and how it was loaded; snapshots no mark names are removed."""
        marks = await self._db.run(read_marks)
        loaded: dict[str, tuple[TypeIndex, str]] = {}
        for record_type in record_types:
            base = file_base(self.path, record_type)
            loaded[record_type] = await self._load(params, record_type, base, marks.get(record_type))
            keep = marks[record_type].generation if record_type in marks else None
            await self._offload(remove_other_snapshots, base, keep)
        for record_type in marks.keys() - set(record_types):  # every record of the type deleted
            with suppress(Exception):  # a cleanup (a full disk): must not keep the store from opening
                await self._db.write(partial(commit_mark, record_type=record_type, mark=None))
                await self._offload(remove_other_snapshots, file_base(self.path, record_type), None)
        return loaded

    async def _load(
        self, params: IndexParams, record_type: str, base: Path, mark: Mark | None
    ) -> tuple[TypeIndex, str]:
        """The index from its snapshot and the changes since its mark, or else from every chunk in SQLite."""
        checked = "checked against the database"
        chunks = partial(load_chunks, record_type=record_type, dimension=params.dimension, org_code=self._org_code)
        if mark is not None:
            try:
                added = await self._db.run(partial(chunks, after=mark.last_id))
                mapped = len(added[0]) == 0  # nothing to add: map the graph, read it into memory later (own)
                loaded = await self._offload(read_snapshot, params, base, mark, mapped)
                codes = org_table(loaded.organizations, self._org_code)
                checks = await self._db.run(partial(changes_since, mark=mark, sample=loaded.sample()))
                index: TypeIndex = await self._offload(restore, params, loaded, codes, checks, added)
                self.marks[record_type] = mark
                if index.mapped:
                    self.owning[record_type] = asyncio.ensure_future(self._own(record_type, index))
                return index, "snapshot"
            except Exception as error:  # damaged, or another state than SQLite's: SQLite is the truth
                checked = f"checked against the database ({error})"
                base = folder_of(base, mark.generation) / "index"
        ids, vectors, orgs, rows = await self._db.run(chunks)
        index, how = await self._offload(TypeIndex.load, params, base, ids, vectors, orgs, rows)
        return index, f"snapshot {checked}" if how == "snapshot" else how

    async def _own(self, record_type: str, index: TypeIndex) -> None:
        """Replace the mapped graph by one read into memory, without holding searches back meanwhile."""
        graph = folder_of(file_base(self.path, record_type), self.marks[record_type].generation) / "index.faiss"
        hnsw, vectors = await self._offload(index.owned_copy, graph)
        async with index.lock.write():
            index.adopt(hnsw, vectors)

    async def owned(self, indexes: dict[str, TypeIndex]) -> None:
        """Wait until no index is memory-mapped: before a write commits, so a failure fails the write."""
        for record_type, owning in list(self.owning.items()):
            try:
                await asyncio.shield(owning)
            except Exception:
                self.owning[record_type] = asyncio.ensure_future(self._own(record_type, indexes[record_type]))
                raise
            del self.owning[record_type]

    async def save_changed(self, indexes: dict[str, TypeIndex]) -> None:
        """Save what changed; a mark behind the delete log moves too (cheaply, the graph linked) so the log is trimmed."""
        seq = await self._db.run(deleted_seq)
        for record_type, index in list(indexes.items()):
            mark = self.marks.get(record_type)
            changed = index.unsaved or index.killed or index.columns.metadata.unsaved
            if changed or mark is None or mark.deleted_seq < seq:
                await self.save(record_type, index)

    async def save(self, record_type: str, index: TypeIndex) -> None:
        """Write ``index``'s snapshot, then move its mark to it (the store's write lock held: every commit is applied).

        Deletes are in the log (``deleted_chunks``) until a snapshot covers them.
        """
        base = file_base(self.path, record_type)
        current = self.marks.get(record_type)
        async with index.lock.read():
            seq = await self._db.run(deleted_seq)
            last = int(index.ids[index.n - 1]) if index.n else 0
            mark = Mark(secrets.token_hex(8), last, seq, index.n)
            graph = folder_of(base, current.generation) if current and not index.unsaved else None
            await self._offload(write_snapshot, index, base, mark, self._org_names(), graph)
            index.killed, index.columns.metadata.unsaved = 0, False
        try:
            await self._db.write(partial(commit_mark, record_type=record_type, mark=mark))
        except Exception as error:
            await self._offload(remove_other_snapshots, base, current.generation if current else None)
            raise OSError(f"snapshot mark not stored: {error}") from error
        self.marks[record_type] = mark
        await self._offload(remove_other_snapshots, base, mark.generation)
