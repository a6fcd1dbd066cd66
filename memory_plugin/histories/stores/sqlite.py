"""The SQLite region store: SQLite as the source of truth, faiss HNSW beside it (``vector_index``).

Layout of a region folder::

    store.sqlite3          records + chunks (vectors as float32 BLOBs), the delete log, the snapshot marks; WAL
    hnsw-<type>.<gen>/     the snapshot of one record_type's index (``index_snapshots``)

Why it looks like this:

* Every acknowledged write is durable when its SQLite transaction commits.
  The faiss index is only a cache: chunk ids come from ``AUTOINCREMENT`` and
  are never reused, and a position in the index never changes its chunk, so a
  snapshot is always a valid *prefix*.  ``open()`` loads the snapshot its mark
  in SQLite names (the graph memory-mapped), checks it cheaply, adds the chunks
  written after the mark and marks the chunks the delete log lists since as
  dead: a restart reads the changes, not every vector.  A damaged or
  disagreeing snapshot is checked against every chunk in SQLite (ids and
  vectors), and rebuilt if that fails too (or if it is more than half dead).
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
  (``sqlite_filters``) and yields chunk ids.  Knowing the candidates' count, the
  planner (``vector_plan``, measured costs) ranks them exactly over an in-memory
  vector matrix, reading the candidate rows in place on the search thread
  (``exact_scores``), or searches HNSW restricted by an ``IDSelectorBitmap``
  and an ``efSearch`` scaled up by the graph's size and 1/selectivity, whichever costs less;
  ``exact_threshold`` caps the scans (200k rows: tens of milliseconds at worst), and very selective filters are always
  scanned (the walk loses recall there).  Without a filter the organisation's bitmap comes from an
  in-memory org-code array (cached per index version), not from SQL.
* Scores are recomputed (``exact_scores``) on the final candidates, so both paths
  return the same cosine values; ties are broken by chunk id.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

import faiss
import numpy as np

from memory_plugin.histories.stores import fusion, lexical
from memory_plugin.histories.stores.base import HistoryStore, unit_vector
from memory_plugin.histories.stores.filter_blocks import DEFAULT_BUDGET
from memory_plugin.histories.stores.filter_columns import can_compile
from memory_plugin.histories.stores.filters import Filter
from memory_plugin.histories.stores.metadata_columns import DEFAULT_LIMIT, metadata_keys
from memory_plugin.histories.stores.records import SCORE_DECIMALS, Chunk, DeleteCounts, Hit, Record, shown_score
from memory_plugin.histories.stores.snapshot_keeper import SnapshotKeeper
from memory_plugin.histories.stores.sqlite_filters import compile_filter, register_functions
from memory_plugin.histories.stores.sqlite_ranking import allowed_ids, fts5_keyword, fused_ranking
from memory_plugin.histories.stores.sqlite_tables import (
    MIGRATIONS,
    fetch_ids,
    hit_rows,
    hits,
    metadata_values,
    read_records,
)
from memory_plugin.histories.stores.sqlite_writes import Added, delete_where, insert_records
from memory_plugin.histories.stores.vector_index import IndexParams, TypeIndex
from memory_plugin.sqlite import Database

log = logging.getLogger(__name__)
T = TypeVar("T")


class SqliteHistoryStore(HistoryStore):
    """A region store in one folder; see the module docstring for the design."""

    def __init__(
        self,
        path: Path,
        *,
        hnsw_m: int = 32,
        ef_construction: int = 64,
        ef_search: int = 128,
        exact_threshold: int = 200_000,
        snapshot_every: int = 100_000,
        filter_target: Literal["columns", "sql"] = "columns",
        metadata_columns: int = DEFAULT_LIMIT,
        filter_cache_mb: int = DEFAULT_BUDGET >> 20,
    ) -> None:
        self.path = Path(path)
        #: Where filters are evaluated: the in-memory columns, or SQL (what every
        #: filter used before the columns; kept selectable so tests and
        #: benchmarks can set the two side by side).
        self.filter_target = filter_target
        self._options = (hnsw_m, ef_construction, ef_search, exact_threshold, metadata_columns, filter_cache_mb << 20)
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
        self._snapshots = SnapshotKeeper(
            self.path, self._db, self._offload, self._org_code, lambda: list(self._org_codes)
        )
        self._words = lexical.WordsMirror()

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
        for record_type, (index, how) in (await self._snapshots.load_all(self._params, record_types)).items():
            self._indexes[record_type] = index
            self.load_report[record_type] = how
            if how != "snapshot":
                log.info("embedded store %s: index %s %s", self.path, record_type, how)
        self._words.start(self._db.path)

    async def keyword_index(self) -> None:
        """Wait until keyword searches rank in the lexical engine (its mirror is built at open, FTS5 ranks
        meanwhile)."""
        await self._words.wait()

    async def snapshot(self) -> None:
        """Persist the indexes that changed (also done on close and every ``snapshot_every`` adds)."""
        async with self._write_lock:
            await self._snapshots.save_changed(self._indexes)

    async def in_memory(self) -> None:
        """Wait until no index is searched memory-mapped: after a reopen they are read into memory in the
        background, and a search reads its rows from the mapped file (slower) until then."""
        await self._snapshots.owned(self._indexes)

    async def close(self) -> None:
        if self._pool is None:
            return
        async with self._write_lock:
            with suppress(Exception):  # a graph left mapped is not written again: its snapshot is current
                await self._snapshots.owned(self._indexes)
            try:
                await self._snapshots.save_changed(self._indexes)
            except (OSError, RuntimeError) as error:  # faiss reports write failures as RuntimeError
                # The snapshot is only a cache of SQLite: the next open() rebuilds it.
                log.warning(
                    "embedded store %s: index snapshot not written (%s); it is rebuilt at next start", self.path, error
                )
        await self._words.stop()
        if self._search_pool is not None:  # before the database: a search reads its hits on its own thread
            self._search_pool.shutdown(wait=True)
            self._search_pool = None
        await self._db.close()
        self._pool.shutdown(wait=True)
        self._pool = None
        self._indexes.clear()
        self._snapshots = SnapshotKeeper(
            self.path, self._db, self._offload, self._org_code, lambda: list(self._org_codes)
        )

    async def health(self) -> dict[str, Any]:
        def count(connection: sqlite3.Connection) -> tuple[int, int]:
            records = connection.execute("SELECT count(*) FROM records").fetchone()[0]
            chunks = connection.execute("SELECT count(*) FROM chunks").fetchone()[0]
            return records, chunks

        records, chunks = await self._db.run(count)
        return {"status": "green", "records": records, "chunks": chunks}

    # -- writes ---------------------------------------------------------------

    async def write_records(self, items: Sequence[tuple[Record, Sequence[Chunk]]]) -> list[str]:
        """Write all ``items`` in one transaction (so each record is atomic), then index them."""
        params = self._require_open()
        if not items:
            return []

        work = partial(insert_records, items=items, dimension=params.dimension)

        async with self._write_lock:
            await self._snapshots.owned(self._indexes)
            removed, added, changed, after = await self._db.write(work)
            await self._apply(removed, added, changed)
        return after

    async def preceding_texts(self, records: Sequence[tuple[Record, str]]) -> dict[str, tuple[int, str]]:
        self._require_open()
        return await self._read_aside(partial(lexical.preceding_texts, records=records))

    async def following(self, organization_id: str, record_ids: Sequence[str]) -> list[str]:
        self._require_open()
        return await self._read_aside(
            partial(lexical.following, organization_id=organization_id, record_ids=record_ids)
        )

    async def read_records(self, organization_id: str, record_ids: Sequence[str]) -> list[tuple[Record, list[Chunk]]]:
        self._require_open()
        return await self._read_aside(partial(read_records, organization_id=organization_id, record_ids=record_ids))

    async def record_owners(self, organization_id: str, record_ids: Sequence[str]) -> dict[str, str | None]:
        self._require_open()
        marks = ", ".join("?" for _ in record_ids)
        sql = f"SELECT record_id, user_id FROM records WHERE organization_id = ? AND record_id IN ({marks})"
        if not record_ids:
            return {}
        return await self._db.run(lambda c: {row[0]: row[1] for row in c.execute(sql, [organization_id, *record_ids])})

    async def delete_record(self, organization_id: str, record_id: str) -> int:
        self._require_open()

        def work(connection: sqlite3.Connection) -> tuple[list[tuple[str, int]], lexical.Changed]:
            changed: lexical.Changed = {}
            where = "r.organization_id = ? AND r.record_id = ?"
            return delete_where(connection, where, [organization_id, record_id], changed), changed

        async with self._write_lock:
            removed, changed = await self._db.write(work)
            await self._apply(removed, [], changed)
        return len(removed)

    async def delete_matching(self, organization_id: str, where: Filter) -> DeleteCounts:
        self._require_open()
        sql, params = compile_filter(where)

        def work(connection: sqlite3.Connection) -> tuple[int, list[tuple[str, int]], lexical.Changed]:
            records = connection.execute(
                f"SELECT count(*) FROM records r WHERE r.organization_id = ? AND {sql}", [organization_id, *params]
            ).fetchone()[0]
            changed: lexical.Changed = {}
            removed = delete_where(connection, f"r.organization_id = ? AND {sql}", [organization_id, *params], changed)
            return records, removed, changed

        async with self._write_lock:
            records, removed, changed = await self._db.write(work)
            await self._apply(removed, [], changed)
        return DeleteCounts(records=records, chunks=len(removed))

    async def _apply(self, removed: list[tuple[str, int]], added: list[Added], changed: lexical.Changed) -> None:
        """Bring the in-memory indexes up to a commit (write lock held)."""
        params = self._require_open()
        await self._offload(self._words.apply, changed)
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
                    await self._snapshots.save(record_type, index)
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

        def work(columns_where: Filter | None, candidates: np.ndarray | None) -> list[Hit]:
            search = partial(index.search, query, org, k, where=columns_where, candidates=candidates)
            return self._search_and_read(search, min_score)

        found = await self._among(index, organization_id, record_type, where, work)
        return [] if found is None else found

    async def _among(
        self,
        index: TypeIndex,
        organization_id: str,
        record_type: str,
        where: Filter,
        work: Callable[[Filter | None, np.ndarray | None], T],
    ) -> T | None:
        """``work(where, None)`` on a search thread with ``where``'s metadata columns kept and the index read-locked,
        or ``work(None, positions)`` with the positions SQL selected when the columns cannot answer ``where``."""
        params = self._require_open()
        keys = metadata_keys(where)
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
                return await asyncio.get_running_loop().run_in_executor(
                    self._search_pool, work, where if candidates is None else None, candidates
                )
        return None

    async def keyword_search(
        self, organization_id: str, record_type: str, text: str, where: Filter, k: int
    ) -> list[Hit]:
        self._require_open()
        index = self._indexes.get(record_type)
        org = self._org_codes.get(organization_id)
        if k <= 0 or org is None or index is None:
            return []
        shard = lexical.shard(organization_id, record_type)

        def work(columns_where: Filter | None, candidates: np.ndarray | None) -> list[Hit] | None:
            ranked = self._words.search(shard, text, k, allowed_ids(index, org, columns_where, candidates))
            if ranked is None:
                return None
            top = [(chunk, round(score, SCORE_DECIMALS)) for chunk, score in ranked]
            return (
                hits(top, self._db.read_here(partial(hit_rows, chunk_ids=[chunk for chunk, _ in top]))) if top else []
            )

        if self._words.index is not None:
            found = await self._among(index, organization_id, record_type, where, work)
            if found is not None:
                return found
        return await self._read_aside(
            partial(fts5_keyword, organization_id=organization_id, record_type=record_type, text=text, where=where, k=k)
        )

    async def hybrid_search(
        self, organization_id: str, record_type: str, vector: np.ndarray, text: str, where: Filter, k: int
    ) -> list[Hit] | None:
        """Both lists, their fusion and the neighbours' share on chunk ids, on one search thread; only the ``k``
        best are read. None while the keyword mirror is not built (or a query word is several tokens)."""
        params = self._require_open()
        query = unit_vector(vector, params.dimension)
        index = self._indexes.get(record_type)
        org = self._org_codes.get(organization_id)
        if index is None or org is None or k <= 0:
            return []
        if self._words.index is None:
            return None
        shard = lexical.shard(organization_id, record_type)

        def work(columns_where: Filter | None, candidates: np.ndarray | None) -> list[Hit] | None:
            allowed = allowed_ids(index, org, columns_where, candidates)
            keyword = self._words.search(shard, text, fusion.CANDIDATES, allowed)
            if keyword is None:
                return None
            dense = index.search(query, org, fusion.CANDIDATES, where=columns_where, candidates=candidates)
            ranked = partial(
                fused_ranking,
                index=index,
                org=org,
                organization_id=organization_id,
                dense=dense,
                keyword=keyword,
                allowed=allowed,
                k=k,
            )
            return self._db.read_here(ranked)

        return await self._among(index, organization_id, record_type, where, work)

    async def neighbours(self, organization_id: str, found: Sequence[Hit]) -> dict[str, list[Hit]]:
        self._require_open()
        if not found:
            return {}

        def read(connection: sqlite3.Connection) -> dict[str, list[Hit]]:
            places = [(hit.record.record_id, hit.chunk_index) for hit in found]
            around = dict(zip([hit.id for hit in found], lexical.adjacent(connection, organization_id, places)))
            rows = hit_rows(connection, sorted({chunk for chunks in around.values() for chunk in chunks}))
            return {key: hits([(chunk, 0.0) for chunk in chunks], rows) for key, chunks in around.items()}

        return await self._read_aside(read)

    async def _read_aside(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on a search thread's read-only connection: beside the writer, never behind a commit."""
        return await asyncio.get_running_loop().run_in_executor(self._search_pool, self._db.read_here, work)

    def _search_and_read(self, search: Callable[[], list[tuple[int, float]]], min_score: float | None) -> list[Hit]:
        """The hits with their shown scores, their rows read and decoded on the search's own thread (one hop,
        and the event loop spends nothing on them: a tenth of a millisecond per search at k 10)."""
        top = [(chunk, shown_score(score)) for chunk, score in search()]
        if min_score is not None:
            top = [(chunk, score) for chunk, score in top if score >= min_score]
        return hits(top, self._db.read_here(partial(hit_rows, chunk_ids=[chunk for chunk, _ in top]))) if top else []

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
