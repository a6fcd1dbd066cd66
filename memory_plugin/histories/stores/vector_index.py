"""The vector index of one record type, held in memory beside the SQLite store: an HNSW graph, the
matrix of its vectors, the chunk id and organisation at each position, and the filter columns.

SQLite is the truth; this is a cache of it that ``SqliteHistoryStore`` loads from a snapshot (or
rebuilds) at ``open()`` and appends to on every write.  It chooses, per search, between exact
ranking over the matrix and HNSW with a selector (see ``sqlite``'s module docstring for why).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np

from memory_plugin.files import fresh_private_file
from memory_plugin.histories.stores.filter_blocks import DEFAULT_BUDGET, FilterBlocks
from memory_plugin.histories.stores.filter_columns import FilterColumns, Row
from memory_plugin.histories.stores.filters import Filter
from memory_plugin.histories.stores.metadata_columns import DEFAULT_LIMIT, KeyColumn, decode_values
from memory_plugin.vector_plan import plan, walk
from memory_plugin.vector_scan import exact_scores, exact_top, scan_shares
from memory_plugin.versioned_cache import VersionedCache

#: Memory for the answers of repeated filters (``TypeIndex.selected``): this much, and per row twice what
#: an organisation's own answer takes (a mask byte and an eight-byte position), so that it is always kept;
#: at 1M chunks 36 MB, against 1.5 GB of vectors.
SELECTIONS_BYTES = 16 << 20
SELECTIONS_BYTES_PER_ROW = 20


class ReadWriteLock:
    """Many readers (searches) or one writer (index mutation); writers go first."""

    def __init__(self) -> None:
        self._condition = asyncio.Condition()
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        async with self._condition:
            await self._condition.wait_for(lambda: not self._writing and not self._waiting_writers)
            self._readers += 1
        try:
            yield
        finally:
            async with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        async with self._condition:
            self._waiting_writers += 1
            await self._condition.wait_for(lambda: not self._writing and not self._readers)
            self._waiting_writers -= 1
            self._writing = True
        try:
            yield
        finally:
            async with self._condition:
                self._writing = False
                self._condition.notify_all()


@dataclass(frozen=True, slots=True)
class IndexParams:
    dimension: int
    hnsw_m: int
    ef_construction: int
    ef_search: int
    exact_threshold: int
    #: The most metadata keys kept as filter columns (``metadata_columns``).
    metadata_columns: int = DEFAULT_LIMIT
    #: The bytes of contiguous copies of repeated filters' rows (``filter_blocks``); 0 keeps none.
    filter_cache_bytes: int = DEFAULT_BUDGET


class TypeIndex:
    """One record_type's vectors: HNSW graph + matrix + position ↔ chunk id maps.

    Positions are append-only; ``ids`` is strictly increasing, so a chunk id
    maps to its position by binary search.  ``orgs[pos]`` is the organisation
    code of a live chunk and -1 for a dead one.  Only the methods called under
    the write lock mutate; readers take local references first.
    """

    def __init__(self, params: IndexParams, hnsw: faiss.Index, capacity: int, *, with_vectors: bool = True) -> None:
        self.params = params
        self.hnsw = hnsw
        capacity = max(capacity, 1024)
        self.ids = np.zeros(capacity, dtype=np.int64)
        self.vectors = np.zeros((capacity if with_vectors else 0, params.dimension), dtype=np.float32)
        #: The graph and ``vectors`` are read-only views of a snapshot file: ``adopt`` an owned
        #: copy before ``append`` (faiss aborts the process when a viewed graph grows).
        self.mapped = False
        self.orgs = np.full(capacity, -1, dtype=np.int32)
        self.columns = FilterColumns(capacity, params.metadata_columns)
        self.n = 0
        self.version = 0
        self.unsaved = 0
        #: Chunks killed since the last snapshot.
        self.killed = 0
        self.lock = ReadWriteLock()
        #: Contiguous copies of the rows of filters searched again (``filter_blocks``).
        self.blocks = FilterBlocks(params.filter_cache_bytes)
        #: ``(mask or None, positions)`` of each organisation and filter searched, at the version taken at.
        self._selections: VersionedCache[tuple[np.ndarray | None, np.ndarray]] = VersionedCache(
            SELECTIONS_BYTES + SELECTIONS_BYTES_PER_ROW * capacity, entry_share=2
        )

    @staticmethod
    def new_hnsw(params: IndexParams) -> faiss.Index:
        hnsw = faiss.IndexHNSWFlat(params.dimension, params.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = params.ef_construction
        hnsw.hnsw.efSearch = params.ef_search
        return hnsw

    # -- mutation (write lock held) ---------------------------------------

    def append(
        self,
        ids: np.ndarray,
        vectors: np.ndarray,
        orgs: np.ndarray,
        rows: Sequence[Row],
        metadata: Sequence[Mapping[str, Any]] | None = None,
        *,
        to_hnsw: bool = True,
    ) -> None:
        if len(ids) == 0:
            return
        if self.mapped:
            raise RuntimeError("a memory-mapped index cannot grow: adopt an owned copy first")
        if self.n and ids[0] <= self.ids[self.n - 1]:
            raise RuntimeError("chunk ids must grow")
        end = self.n + len(ids)
        if end > len(self.ids):
            self._grow(max(end, 2 * len(self.ids)))
        self.ids[self.n : end] = ids
        self.vectors[self.n : end] = vectors
        self.orgs[self.n : end] = orgs
        self.columns.assign(np.arange(self.n, end), rows, metadata)
        if to_hnsw:
            self.hnsw.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self.n = end
        self.unsaved += len(ids)
        self.version += 1

    def owned_copy(self, path: Path) -> tuple[faiss.Index, np.ndarray]:
        """The graph read (not mapped) from ``path`` and its vectors in an array with room to grow."""
        hnsw = faiss.read_index(str(path))
        if hnsw.ntotal != self.n:
            raise RuntimeError("the snapshot file no longer holds the mapped graph")
        hnsw.hnsw.efSearch = self.params.ef_search  # type: ignore[attr-defined]
        storage = faiss.downcast_index(hnsw.storage)  # type: ignore[attr-defined]
        vectors = np.zeros((len(self.ids), self.params.dimension), dtype=np.float32)
        vectors[: self.n] = faiss.rev_swig_ptr(storage.get_xb(), self.n * hnsw.d).reshape(self.n, hnsw.d)  # type: ignore[attr-defined]
        return hnsw, vectors

    def adopt(self, hnsw: faiss.Index, vectors: np.ndarray) -> None:
        """Search ``owned_copy``'s graph and vectors from now on, the mapped ones no more (write lock held)."""
        self.hnsw, self.vectors, self.mapped = hnsw, vectors, False
        self.version += 1

    def kill(self, ids: np.ndarray) -> None:
        positions = self.positions(ids)
        if len(positions):
            self.orgs[positions] = -1
            self.killed += len(positions)
            self.version += 1

    def metadata_column(self, chunk_ids: np.ndarray, texts: Sequence[str], below: int) -> KeyColumn:
        """A metadata key's column at the positions under ``below`` from each chunk's value (JSON text), ids ascending.

        Chunks at ``below`` and after were indexed while the column was
        pending (``MetadataColumns.begin``): their values come from the writes.
        """
        column = KeyColumn()
        ids = self.ids[:below]  # positions under ``below`` never change: a grown array holds the same
        positions = np.searchsorted(ids, chunk_ids)
        inside = positions < below
        inside[inside] = ids[positions[inside]] == chunk_ids[inside]
        values = decode_values(texts)
        column.add(positions[inside].tolist(), [value for value, kept in zip(values, inside.tolist()) if kept])
        return column

    def _grow(self, capacity: int) -> None:
        # New arrays: readers holding the old ones keep a valid (older) view.
        ids = np.zeros(capacity, dtype=np.int64)
        vectors = np.zeros((capacity, self.params.dimension), dtype=np.float32)
        orgs = np.full(capacity, -1, dtype=np.int32)
        ids[: self.n], vectors[: self.n], orgs[: self.n] = (
            self.ids[: self.n],
            self.vectors[: self.n],
            self.orgs[: self.n],
        )
        self.columns.grow(capacity, self.n)
        self.ids, self.vectors, self.orgs = ids, vectors, orgs
        self._selections.max_bytes = SELECTIONS_BYTES + SELECTIONS_BYTES_PER_ROW * capacity

    # -- reading ----------------------------------------------------------

    def positions(self, chunk_ids: np.ndarray) -> np.ndarray:
        """Positions of the given chunk ids; ids not (yet) indexed are dropped."""
        n, ids = self.n, self.ids
        if n == 0 or len(chunk_ids) == 0:
            return np.empty(0, dtype=np.int64)
        positions = np.searchsorted(ids[:n], chunk_ids)
        inside = positions < n
        positions, chunk_ids = positions[inside], chunk_ids[inside]
        found: np.ndarray = positions[ids[positions] == chunk_ids]
        return found

    def org_positions(self, org: int) -> tuple[np.ndarray, np.ndarray]:
        """``(mask, positions)`` of the organisation's live chunks."""
        mask, positions = self.selected(org, None)
        assert mask is not None
        return mask, positions

    def selected(self, org: int, where: Filter | None) -> tuple[np.ndarray | None, np.ndarray]:
        """``(mask or None, positions)`` of the organisation's live chunks that satisfy ``where`` (its metadata
        keys kept), from the last answer while nothing was written since.

        Filters repeat (a tenant's ``user_id``, ``filter[language]=en``), and their
        answer costs more than their search when they pass few rows: at 1M chunks,
        0.05 ms of a 1% filter's 1 ms, 2 ms of a 30% one's 19 (``scripts/bench_search.py``).
        """
        key = (org, where or None)
        version = self.version
        found = self._selections.get(key, version)
        if found is not None:
            return found
        n = self.n
        if where:
            mask, positions = self.org_positions(org)
            found = self.columns.select(where, n, mask)
        else:
            mask = self.orgs[:n] == org
            found = mask, np.flatnonzero(mask)
        self._selections.put(key, version, found, sum(part.nbytes for part in found if part is not None))
        return found

    def search(
        self,
        query: np.ndarray,
        org: int,
        k: int,
        *,
        where: Filter | None = None,
        candidates: np.ndarray | None = None,
        path: Literal["plan", "exact", "graph"] = "plan",
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(chunk_id, score)`` of the org's chunks.

        Restricted to ``candidates`` (positions, from SQL) when given, else to
        the positions whose columns satisfy ``where`` (its metadata keys kept).
        ``vector_plan`` chooses the exact scan or the graph walk; ``path`` forces one
        (calibration and tests).
        """
        n = self.n
        ids, vectors = self.ids[:n], self.vectors[:n]
        mask: np.ndarray | None = None
        key = None if candidates is not None else (org, where)  # SQL's candidates name no filter here
        if candidates is None:
            mask, candidates = self.selected(org, where)
        count = len(candidates)
        if count == 0 or k <= 0:
            return []
        total = self.hnsw.ntotal
        choice = plan(
            count,
            total,
            k=k,
            ef_search=self.params.ef_search,
            hnsw_m=self.params.hnsw_m,
            dimension=self.params.dimension,
            exact_threshold=self.params.exact_threshold,
            scan_threads=scan_shares(count),
        )
        if path == "exact" or (path == "plan" and choice.exact):
            copied = None if key is None else self.blocks.rows(key, candidates, vectors, n)
            scanned, rows = copied if copied is not None else (vectors, candidates)
            kept, scores = exact_top(scanned, rows, query, k)
            return best_k(ids, candidates[kept], scores, k)
        found = walk(self.hnsw, query, k, candidates, mask, choice.ef)
        return best_k(ids, found, exact_scores(vectors, found, query), k)

    # -- persistence ------------------------------------------------------

    def save(self, base: Path) -> None:
        """Write the snapshot atomically enough: any prefix of positions is valid."""
        n = self.hnsw.ntotal
        ids_tmp, index_tmp = base.with_suffix(".ids.npy.tmp"), base.with_suffix(".faiss.tmp")
        try:
            with os.fdopen(fresh_private_file(ids_tmp), "wb") as file:
                np.save(file, self.ids[:n])
                file.flush()
                os.fsync(file.fileno())
            os.close(fresh_private_file(index_tmp))  # faiss keeps the mode of the file it truncates
            faiss.write_index(self.hnsw, str(index_tmp))
            with open(index_tmp, "rb") as file:
                os.fsync(file.fileno())
        except BaseException:
            # A full or read-only disk: leave no half-written files taking space.
            for leftover in (ids_tmp, index_tmp):
                with suppress(OSError):
                    leftover.unlink()
            raise
        os.replace(ids_tmp, base.with_suffix(".ids.npy"))
        os.replace(index_tmp, base.with_suffix(".faiss"))
        self.unsaved = 0

    @classmethod
    def load(
        cls, params: IndexParams, base: Path, ids: np.ndarray, vectors: np.ndarray, orgs: np.ndarray, rows: list[Row]
    ) -> tuple[TypeIndex, str]:
        """The index for the live chunks given (sorted by id), from the snapshot when it is sound."""
        try:
            index = cls._from_snapshot(params, base, ids, vectors, orgs, rows)
            if index is not None:
                return index, "snapshot"
            how = "rebuilt (no snapshot)"
        except Exception as error:  # corrupt or inconsistent: SQLite is the truth
            how = f"rebuilt ({error})"
        index = cls(params, cls.new_hnsw(params), len(ids))
        index.append(ids, vectors, orgs, rows)
        return index, how

    @classmethod
    def _from_snapshot(
        cls, params: IndexParams, base: Path, ids: np.ndarray, vectors: np.ndarray, orgs: np.ndarray, rows: list[Row]
    ) -> TypeIndex | None:
        index_path, ids_path = base.with_suffix(".faiss"), base.with_suffix(".ids.npy")
        if not index_path.exists() or not ids_path.exists():
            return None
        saved_ids = np.load(ids_path)
        hnsw = faiss.read_index(str(index_path))
        if hnsw.d != params.dimension or hnsw.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError("snapshot has another dimension or metric")
        if hnsw.ntotal > len(saved_ids):
            raise ValueError("snapshot index is longer than its id list")
        saved_ids = saved_ids[: hnsw.ntotal]  # an older index beside newer ids is a valid prefix
        if len(saved_ids) > 1 and not np.all(np.diff(saved_ids) > 0):
            raise ValueError("snapshot ids are not increasing")
        last = saved_ids[-1] if len(saved_ids) else -1
        old = ids <= last
        old_positions = np.searchsorted(saved_ids, ids[old])
        if not np.array_equal(saved_ids[np.minimum(old_positions, len(saved_ids) - 1)], ids[old]):
            raise ValueError("snapshot lacks live chunks")
        if len(saved_ids) > 1000 and old.sum() < len(saved_ids) / 2:
            raise ValueError("snapshot is mostly dead chunks: compacting")
        storage = faiss.downcast_index(hnsw.storage)  # type: ignore[attr-defined]
        stored = faiss.rev_swig_ptr(storage.get_xb(), hnsw.ntotal * hnsw.d)  # type: ignore[attr-defined]
        stored = stored.reshape(hnsw.ntotal, hnsw.d)
        if not np.array_equal(stored[old_positions], vectors[old]):
            raise ValueError("snapshot vectors differ from the database")
        hnsw.hnsw.efSearch = params.ef_search  # type: ignore[attr-defined]
        index = cls(params, hnsw, len(saved_ids) + int((~old).sum()))
        index.append(
            saved_ids,
            np.zeros((len(saved_ids), params.dimension), np.float32),
            np.full(len(saved_ids), -1, np.int32),
            [],
            to_hnsw=False,
        )
        index.vectors[old_positions] = vectors[old]
        index.orgs[old_positions] = orgs[old]
        old_count = int(old.sum())  # ids are sorted: the old ones come first
        index.columns.assign(old_positions, rows[:old_count])
        index.append(ids[~old], vectors[~old], orgs[~old], rows[old_count:])
        index.unsaved = int((~old).sum())
        return index


def best_k(ids: np.ndarray, positions: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Best ``k`` ``(ids[position], score)`` by score, ties by chunk id: deterministic whatever the input order.

    Only the ids of the scores still in the race are read (at 1M chunks a 1% filter's 10k scattered ids
    cost more than the partition).
    """
    if len(positions) > k:
        negated = -scores
        keep = negated <= np.partition(negated, k - 1)[k - 1]  # everything tied with the k-th stays in the race
        positions, scores = positions[keep], scores[keep]
    found = ids[positions]
    order = np.lexsort((found, -scores))[:k]
    # one clip over the k kept, not one per hit: numpy's scalar clip cost a third of a 1% search
    return list(zip(found[order].tolist(), np.clip(scores[order], -1.0, 1.0).tolist()))
