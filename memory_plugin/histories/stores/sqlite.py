"""The SQLite region store: SQLite as the source of truth, faiss HNSW beside it (``vector_index``).

Layout of a region folder::

    store.sqlite3          records + chunks (vectors as float32 BLOBs), WAL
    hnsw-<type>.faiss      HNSW snapshot of one record_type (positions 0..n-1)
    hnsw-<type>.ids.npy    the chunk id held at each snapshot position

Why it looks like this:

* Every acknowledged write is durable when its SQLite transaction commits.
  The faiss index is only a cache: chunk ids come from ``AUTOINCREMENT`` and
  are never reused, and a position in the index never changes its chunk, so a
  snapshot is always a valid *prefix*.  ``open()`` loads the snapshot, checks
  it against SQLite (ids and vectors), adds the chunks written since and marks
  the chunks deleted since as dead.  A missing, corrupt or inconsistent
  snapshot (or one more than half dead) is rebuilt from SQLite.
* HNSW cannot remove vectors, so deleted chunks stay in the graph as dead
  positions.  Every search goes through a candidate set (the organisation is
  always a filter) built from live chunks only, so stale vectors never surface;
  hits are finally hydrated from SQLite by chunk id, which drops anything
  deleted meanwhile.
* Filters select candidate positions *before* the vector search.  Filters on
  top-level fields are evaluated over in-memory columns kept beside each
  index (``filter_columns``: one row per position, filled from SQLite at
  ``open()`` and on every write; a selective string equality reads cached
  positions instead of every row).  A metadata key becomes a column the first
  time a filter names it (``metadata_columns``: one pass over SQLite while
  writes go on, see ``_build_metadata``; then kept in step with every write); at most ``metadata_columns`` keys per index, least
  recently used dropped.  A filter naming more keys than that compiles to SQL
  (``sqlite_filters``) and yields chunk ids.  Few candidates (``<= exact_threshold``) are
  ranked exactly over an in-memory vector matrix, reading the candidate rows in
  place on the search thread (``exact_scores``); many are searched
  with HNSW restricted by an ``IDSelectorBitmap`` and an ``efSearch`` scaled up
  by 1/selectivity.  Without a filter the organisation's bitmap comes from an
  in-memory org-code array (cached per index version), not from SQL.
* Scores are recomputed (``exact_scores``) on the final candidates, so both paths
  return the same cosine values; ties are broken by chunk id.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from functools import partial
from hashlib import sha1
from pathlib import Path
from typing import Any, Literal, TypeVar

import faiss
import numpy as np

from memory_plugin.dates import to_micros
from memory_plugin.histories.stores.base import HistoryStore, unit_vector
from memory_plugin.histories.stores.filter_columns import Row, can_compile
from memory_plugin.histories.stores.filters import Filter
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
from memory_plugin.histories.stores.metadata_columns import DEFAULT_LIMIT, metadata_keys
from memory_plugin.histories.stores.records import Chunk, DeleteCounts, Hit, Record, shown_score
from memory_plugin.histories.stores.sqlite_filters import compile_filter, register_functions
from memory_plugin.histories.stores.sqlite_tables import (
    MIGRATIONS,
    column_row,
    fetch_ids,
    load_chunks,
    metadata_values,
    record_from_row,
)
from memory_plugin.histories.stores.vector_index import IndexParams, TypeIndex
from memory_plugin.sqlite import Database

log = logging.getLogger(__name__)
T = TypeVar("T")


def _file_base(folder: Path, record_type: str) -> Path:
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", record_type):
        return folder / f"hnsw-{record_type}"
    return folder / f"hnsw-{sha1(record_type.encode()).hexdigest()[:16]}"


#: ``(record_type, chunk ids, vectors, organization ids, column rows, metadata)`` per added group.
_Added = tuple[str, list[int], list[np.ndarray], list[str], list[Row], list[Mapping[str, Any]]]


class SqliteHistoryStore(HistoryStore):
    """A region store in one folder; see the module docstring for the design."""

    def __init__(
        self,
        path: Path,
        *,
        hnsw_m: int = 32,
        ef_construction: int = 64,
        ef_search: int = 128,
        exact_threshold: int = 20_000,
        snapshot_every: int = 100_000,
        filter_target: Literal["columns", "sql"] = "columns",
        metadata_columns: int = DEFAULT_LIMIT,
    ) -> None:
        self.path = Path(path)
        #: Where filters are evaluated: the in-memory columns, or SQL (what every
        #: filter used before the columns; kept selectable so tests and
        #: benchmarks can set the two side by side).
        self.filter_target = filter_target
        self._options = (hnsw_m, ef_construction, ef_search, exact_threshold, metadata_columns)
        self._snapshot_every = snapshot_every
        self._db = Database(self.path / "store.sqlite3", MIGRATIONS)
        self._pool: ThreadPoolExecutor | None = None
        self._search_pool: ThreadPoolExecutor | None = None
        self._params: IndexParams | None = None
        self._indexes: dict[str, TypeIndex] = {}
        self._org_codes: dict[str, int] = {}
        self._write_lock = asyncio.Lock()
        #: Metadata columns being built, per (record_type, key).
        self._building: dict[tuple[str, str], asyncio.Future[None]] = {}
        #: How each index was loaded at open(): "snapshot" or "rebuilt (...)".
        self.load_report: dict[str, str] = {}
        #: The snapshot mark of each index saved or loaded (``index_snapshots``).
        self._marks: dict[str, Mark] = {}
        #: The reads of the memory-mapped graphs into memory, per record type (``_own``).
        self._owning: dict[str, asyncio.Future[None]] = {}

    # -- lifecycle ----------------------------------------------------------

    async def open(self, dimension: int) -> None:
        self._params = IndexParams(dimension, *self._options)
        self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="faiss")
        # Searches run side by side, one thread each: OpenMP workers of a single
        # query only spin-wait, taking the cores from the other searches.
        self._search_pool = ThreadPoolExecutor(
            max_workers=os.cpu_count() or 2,
            thread_name_prefix="faiss-search",
            initializer=faiss.omp_set_num_threads,
            initargs=(1,),
        )
        await self._db.open()
        await self._db.run(register_functions)
        record_types = await self._db.run(
            lambda c: [row[0] for row in c.execute("SELECT DISTINCT record_type FROM records ORDER BY 1")]
        )
        marks = await self._db.run(read_marks)
        for record_type in record_types:
            base = _file_base(self.path, record_type)
            index, how = await self._load(record_type, base, marks.get(record_type))
            self._indexes[record_type] = index
            self.load_report[record_type] = how
            if how != "snapshot":
                log.info("embedded store %s: index %s %s", self.path, record_type, how)
            await self._offload(
                remove_other_snapshots, base, marks[record_type].generation if record_type in marks else None
            )
        for record_type in marks.keys() - set(record_types):  # every record of the type deleted
            await self._db.write(partial(commit_mark, record_type=record_type, mark=None))
            await self._offload(remove_other_snapshots, _file_base(self.path, record_type), None)

    async def _load(self, record_type: str, base: Path, mark: Mark | None) -> tuple[TypeIndex, str]:
        """The index from its snapshot and the changes since its mark, or else from every chunk in SQLite."""
        params = self._require_open()
        checked = "checked against the database"
        if mark is not None:
            try:
                added = await self._db.run(partial(self._chunks, record_type=record_type, after=mark.last_id))
                mapped = len(added[0]) == 0  # nothing to add: map the graph, read it into memory later (_own)
                loaded = await self._offload(read_snapshot, params, base, mark, mapped)
                codes = org_table(loaded.organizations, self._org_code)
                checks = await self._db.run(partial(changes_since, mark=mark, sample=loaded.sample()))
                index = await self._offload(restore, params, loaded, codes, checks, added)
                self._marks[record_type] = mark
                if index.mapped:
                    graph = folder_of(base, mark.generation) / "index.faiss"
                    self._owning[record_type] = asyncio.ensure_future(self._own(index, graph))
                return index, "snapshot"
            except Exception as error:  # damaged, or another state than SQLite's: SQLite is the truth
                checked = f"checked against the database ({error})"
                base = folder_of(base, mark.generation) / "index"
        ids, vectors, orgs, rows = await self._db.run(partial(self._chunks, record_type=record_type))
        index, how = await self._offload(TypeIndex.load, params, base, ids, vectors, orgs, rows)
        return index, f"snapshot {checked}" if how == "snapshot" else how

    async def _own(self, index: TypeIndex, graph: Path) -> None:
        """Replace the mapped graph by one read into memory, without holding searches back meanwhile."""
        hnsw, vectors = await self._offload(index.owned_copy, graph)
        async with index.lock.write():
            index.adopt(hnsw, vectors)

    async def _owned(self) -> None:
        """Wait until no index is memory-mapped: before a write commits, so a failure fails the write."""
        for record_type, owning in list(self._owning.items()):
            try:
                await asyncio.shield(owning)
            except Exception:
                index = self._indexes[record_type]
                self._owning[record_type] = asyncio.ensure_future(
                    self._own(
                        index,
                        folder_of(_file_base(self.path, record_type), self._marks[record_type].generation)
                        / "index.faiss",
                    )
                )
                raise
            del self._owning[record_type]

    def _chunks(
        self, connection: sqlite3.Connection, *, record_type: str, after: int = -1
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Row]]:
        params = self._require_open()
        return load_chunks(
            connection, record_type=record_type, dimension=params.dimension, org_code=self._org_code, after=after
        )

    async def snapshot(self) -> None:
        """Persist the indexes that changed (also done on close and every ``snapshot_every`` adds)."""
        async with self._write_lock:
            await self._snapshot_all()

    async def _snapshot_all(self) -> None:
        for record_type, index in list(self._indexes.items()):
            if index.unsaved or index.killed or record_type not in self._marks:
                await self._snapshot(record_type, index)

    async def _snapshot(self, record_type: str, index: TypeIndex) -> None:
        """Write ``index``'s snapshot, then move its mark to it (``_write_lock`` held: every commit is applied).

        Deletes are in the log (``deleted_chunks``) until a snapshot covers them.
        """
        base = _file_base(self.path, record_type)
        async with index.lock.read():
            seq = await self._db.run(deleted_seq)
            last = int(index.ids[index.n - 1]) if index.n else 0
            mark = Mark(secrets.token_hex(8), last, seq, index.n)
            current = self._marks.get(record_type)
            graph = folder_of(base, current.generation) if current and not index.unsaved else None
            await self._offload(write_snapshot, index, base, mark, list(self._org_codes), graph)
            index.killed = 0
        try:
            await self._db.write(partial(commit_mark, record_type=record_type, mark=mark))
        except Exception as error:
            await self._offload(
                remove_other_snapshots,
                base,
                self._marks[record_type].generation if record_type in self._marks else None,
            )
            raise OSError(f"snapshot mark not stored: {error}") from error
        self._marks[record_type] = mark
        await self._offload(remove_other_snapshots, base, mark.generation)

    async def close(self) -> None:
        if self._pool is None:
            return
        async with self._write_lock:
            with suppress(Exception):  # a graph left mapped is not written again: its snapshot is current
                await self._owned()
            try:
                await self._snapshot_all()
            except (OSError, RuntimeError) as error:  # faiss reports write failures as RuntimeError
                # The snapshot is only a cache of SQLite: the next open() rebuilds it.
                log.warning(
                    "embedded store %s: index snapshot not written (%s); it is rebuilt at next start", self.path, error
                )
        await self._db.close()
        self._pool.shutdown(wait=True)
        self._pool = None
        if self._search_pool is not None:
            self._search_pool.shutdown(wait=True)
            self._search_pool = None
        self._indexes.clear()
        self._marks.clear()

    async def health(self) -> dict[str, Any]:
        def count(connection: sqlite3.Connection) -> tuple[int, int]:
            records = connection.execute("SELECT count(*) FROM records").fetchone()[0]
            chunks = connection.execute("SELECT count(*) FROM chunks").fetchone()[0]
            return records, chunks

        records, chunks = await self._db.run(count)
        return {"status": "green", "records": records, "chunks": chunks}

    # -- writes ---------------------------------------------------------------

    async def write_records(self, items: Sequence[tuple[Record, Sequence[Chunk]]]) -> None:
        """Write all ``items`` in one transaction (so each record is atomic), then index them."""
        params = self._require_open()
        if not items:
            return

        def work(connection: sqlite3.Connection) -> tuple[list[tuple[str, int]], list[_Added]]:
            # On the database thread: normalising thousands of vectors stays off the event loop.
            prepared = [
                (record, [(chunk, unit_vector(chunk.vector, params.dimension)) for chunk in chunks])
                for record, chunks in items
            ]
            removed: list[tuple[str, int]] = []
            added: dict[str, _Added] = {}
            for record, chunks in prepared:
                removed += self._delete_sql(
                    connection, "r.organization_id = ? AND r.record_id = ?", [record.organization_id, record.record_id]
                )
                rid = connection.execute(
                    "INSERT INTO records (organization_id, record_id, record_type, region, record_created_at,"
                    " ingested_at, user_id, document_id, retention, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.organization_id,
                        record.record_id,
                        record.record_type,
                        record.region,
                        to_micros(record.record_created_at),
                        to_micros(record.ingested_at),
                        record.user_id,
                        record.document_id,
                        record.retention,
                        json.dumps(dict(record.metadata)),
                    ),
                ).lastrowid
                group = added.setdefault(record.record_type, (record.record_type, [], [], [], [], []))
                row = column_row(record)
                for chunk, vector in chunks:
                    chunk_row = connection.execute(
                        "INSERT INTO chunks (rid, chunk_index, chunk_total, text, vector) VALUES (?, ?, ?, ?, ?)",
                        (rid, chunk.index, chunk.total, chunk.text, vector.tobytes()),
                    ).lastrowid
                    group[1].append(int(chunk_row))  # type: ignore[arg-type]
                    group[2].append(vector)
                    group[3].append(record.organization_id)
                    group[4].append(row)
                    group[5].append(record.metadata)
            return removed, list(added.values())

        async with self._write_lock:
            await self._owned()
            removed, added = await self._db.write(work)
            await self._apply(removed, added)

    async def record_owners(self, organization_id: str, record_ids: Sequence[str]) -> dict[str, str | None]:
        self._require_open()
        marks = ", ".join("?" for _ in record_ids)
        sql = f"SELECT record_id, user_id FROM records WHERE organization_id = ? AND record_id IN ({marks})"
        if not record_ids:
            return {}
        return await self._db.run(lambda c: {row[0]: row[1] for row in c.execute(sql, [organization_id, *record_ids])})

    async def delete_record(self, organization_id: str, record_id: str) -> int:
        self._require_open()
        async with self._write_lock:
            removed = await self._db.write(
                lambda c: self._delete_sql(c, "r.organization_id = ? AND r.record_id = ?", [organization_id, record_id])
            )
            await self._apply(removed, [])
        return len(removed)

    async def delete_matching(self, organization_id: str, where: Filter) -> DeleteCounts:
        self._require_open()
        sql, params = compile_filter(where)

        def work(connection: sqlite3.Connection) -> tuple[int, list[tuple[str, int]]]:
            records = connection.execute(
                f"SELECT count(*) FROM records r WHERE r.organization_id = ? AND {sql}", [organization_id, *params]
            ).fetchone()[0]
            return records, self._delete_sql(connection, f"r.organization_id = ? AND {sql}", [organization_id, *params])

        async with self._write_lock:
            records, removed = await self._db.write(work)
            await self._apply(removed, [])
        return DeleteCounts(records=records, chunks=len(removed))

    @staticmethod
    def _delete_sql(connection: sqlite3.Connection, where: str, params: list[Any]) -> list[tuple[str, int]]:
        """Delete the matching records (chunks cascade); return their ``(record_type, chunk_id)``s."""
        cursor = connection.cursor()
        cursor.row_factory = None
        removed = cursor.execute(
            f"SELECT r.record_type, c.id FROM records r JOIN chunks c ON c.rid = r.rid WHERE {where}", params
        ).fetchall()
        cursor.execute(f"DELETE FROM records WHERE rid IN (SELECT r.rid FROM records r WHERE {where})", params)
        return removed

    async def _apply(self, removed: list[tuple[str, int]], added: list[_Added]) -> None:
        """Bring the in-memory indexes up to a commit (write lock held)."""
        params = self._require_open()
        by_type: dict[str, list[int]] = {}
        for record_type, chunk in removed:
            by_type.setdefault(record_type, []).append(chunk)
        for record_type, chunks in by_type.items():
            index = self._indexes.get(record_type)
            if index is not None:
                async with index.lock.write():
                    index.kill(np.sort(np.asarray(chunks, dtype=np.int64)))
        for record_type, ids, vectors, orgs, rows, metadata in added:
            if not ids:
                continue
            index = self._indexes.get(record_type)
            if index is None:
                index = self._indexes[record_type] = TypeIndex(params, TypeIndex.new_hnsw(params), len(ids))
            codes = np.asarray([self._org_code(org) for org in orgs], dtype=np.int32)
            async with index.lock.write():
                await self._offload(
                    index.append, np.asarray(ids, dtype=np.int64), np.stack(vectors), codes, rows, metadata
                )
            if index.unsaved >= self._snapshot_every:
                try:
                    await self._snapshot(record_type, index)
                except (OSError, RuntimeError) as error:
                    # The write is committed in SQLite already: a snapshot that cannot be
                    # written (full disk) must not turn its acknowledgement into an error.
                    log.warning("embedded store %s: index snapshot not written (%s)", self.path, error)

    # -- search -----------------------------------------------------------------

    async def search(
        self,
        organization_id: str,
        record_type: str,
        vector: np.ndarray,
        where: Filter,
        k: int,
        min_score: float | None = None,
    ) -> list[Hit]:
        params = self._require_open()
        query = unit_vector(vector, params.dimension)
        index = self._indexes.get(record_type)
        org = self._org_codes.get(organization_id)
        if index is None or org is None or k <= 0:
            return []
        keys = metadata_keys(where)
        top: list[tuple[int, float]] = []
        on_sql = bool(where) and (self.filter_target == "sql" or not can_compile(where, params.metadata_columns))
        candidates: np.ndarray | None = None
        for attempt in range(3):
            if on_sql and candidates is None:
                candidates = await self._sql_candidates(index, organization_id, record_type, where)
            elif keys:
                await self._keep_metadata(index, record_type, keys)
            async with index.lock.read():
                if candidates is None and index.columns.metadata.missing(keys):
                    on_sql = attempt == 1  # dropped meanwhile for other keys: once more, then SQL
                    continue
                if candidates is None:
                    index.columns.metadata.touch(keys)
                top = await asyncio.get_running_loop().run_in_executor(
                    self._search_pool,
                    partial(
                        index.search, query, org, k, where=where if candidates is None else None, candidates=candidates
                    ),
                )
                break
        top = [(chunk, shown_score(score)) for chunk, score in top]
        if min_score is not None:
            top = [(chunk, score) for chunk, score in top if score >= min_score]
        return await self._hydrate(top)

    async def _sql_candidates(
        self, index: TypeIndex, organization_id: str, record_type: str, where: Filter
    ) -> np.ndarray:
        """The positions of the chunks ``where`` passes, selected by SQL."""
        sql, sql_params = compile_filter(where)
        chunk_ids = await self._db.run(
            lambda c: fetch_ids(
                c,
                "SELECT c.id FROM records r JOIN chunks c ON c.rid = r.rid"
                f" WHERE r.organization_id = ? AND r.record_type = ? AND {sql}",
                [organization_id, record_type, *sql_params],
            )
        )
        return index.positions(np.sort(chunk_ids))

    async def _keep_metadata(self, index: TypeIndex, record_type: str, keys: Sequence[str]) -> None:
        """Make sure ``index`` keeps the metadata ``keys`` as columns: one pass over SQLite per new key.

        Searches naming a key being built wait for that one build.
        """
        for key in index.columns.metadata.missing(keys):
            building = self._building.get((record_type, key))
            if building is None:
                building = asyncio.ensure_future(self._build_metadata(index, record_type, key))
                self._building[(record_type, key)] = building
            await asyncio.shield(building)

    async def _build_metadata(self, index: TypeIndex, record_type: str, key: str) -> None:
        """Build ``key``'s column without holding writes back (the pass runs on the read-only connection).

        The key is pending first: every write indexed from then on adds its
        values to it.  The pass over SQLite then starts, and sees every commit
        indexed before (a commit precedes its indexing); its values are kept
        for the positions indexed before the key was pending, the writes' for
        the rest.  A deleted chunk a side still sees is dropped by the
        organisation mask, as everywhere.
        """
        try:
            async with index.lock.write():
                below = index.n
                index.columns.metadata.begin(key)
            try:
                path = f'$."{key}"'  # a FIELD_NAME: cannot break out of the quotes
                chunk_ids, texts = await self._db.read(partial(metadata_values, record_type=record_type, path=path))
                column = await self._offload(index.metadata_column, chunk_ids, texts, below)
            except Exception:
                async with index.lock.write():
                    index.columns.metadata.abandon(key)
                raise
            async with index.lock.write():
                index.columns.metadata.finish(key, column)
        finally:
            self._building.pop((record_type, key), None)

    async def _hydrate(self, top: list[tuple[int, float]]) -> list[Hit]:
        if not top:
            return []

        def work(connection: sqlite3.Connection) -> dict[int, sqlite3.Row]:
            marks = ",".join("?" * len(top))
            rows = connection.execute(
                "SELECT c.id AS chunk_id, c.chunk_index, c.chunk_total, c.text, r.* FROM chunks c"
                f" JOIN records r ON r.rid = c.rid WHERE c.id IN ({marks})",
                [chunk for chunk, _ in top],
            )
            return {row["chunk_id"]: row for row in rows}

        rows = await self._db.run(work)
        hits = [
            Hit(
                record=record_from_row(rows[chunk]),
                chunk_index=rows[chunk]["chunk_index"],
                chunk_total=rows[chunk]["chunk_total"],
                text=rows[chunk]["text"],
                score=score,
            )
            for chunk, score in top
            if chunk in rows  # deleted since the candidates were taken
        ]
        # equal shown scores in one order on every store and CPU, as the OpenSearch store sorts them
        hits.sort(key=lambda hit: (-hit.score, hit.record.record_id, hit.chunk_index))
        return hits

    # -- helpers ------------------------------------------------------------------

    def _org_code(self, organization_id: str) -> int:
        return self._org_codes.setdefault(organization_id, len(self._org_codes))

    def _require_open(self) -> IndexParams:
        if self._params is None or self._pool is None:
            raise RuntimeError(f"embedded store {self.path} is not open")
        return self._params

    async def _offload(self, work: Callable[..., T], *args: Any) -> T:
        assert self._pool is not None
        return await asyncio.get_running_loop().run_in_executor(self._pool, work, *args)
