"""The embedded agentic store: SQLite + FTS5, with in-memory vectors (its tables: ``sqlite_tables``)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memory_plugin.agentic.models import HISTORY, LONG_TERM, SESSIONS, WORKING
from memory_plugin.agentic.stores.backend import AgenticStore
from memory_plugin.agentic.stores.base import (
    ExactTerms,
    InferJob,
    LongTermChange,
    LongTermScope,
    MemoryAdd,
    Merge,
    StoredDoc,
    memory_text,
    normalised,
    owner_key,
    text_changed,
)
from memory_plugin.agentic.stores.bm25 import Change, LexicalIndex
from memory_plugin.agentic.stores.bm25_files import mirror_file, save_mirror
from memory_plugin.agentic.stores.fts import (
    LoggedDatabase,
    MirrorBuild,
    fts_delete,
    fts_put,
    query_words,
    start_log,
)
from memory_plugin.agentic.stores.retention import RetentionStore
from memory_plugin.agentic.stores.retention_sqlite import SqliteRetention
from memory_plugin.agentic.stores.sources import SOURCES, Forgotten, sources_of, without_sources
from memory_plugin.agentic.stores.sqlite_forgetting import forget, index_history_terms
from memory_plugin.agentic.stores.sqlite_posting_reads import matching_docs, read_posted, sorted_page
from memory_plugin.agentic.stores.sqlite_postings import index_postings, indexed_path
from memory_plugin.agentic.stores.sqlite_queues import SqliteQueues
from memory_plugin.agentic.stores.sqlite_tables import (
    CONTAINER_OWNER,
    CONTAINER_USABLE,
    MEMORY_OWNER,
    MIGRATIONS,
    batches,
    bm25_top,
    candidates,
    container_doc,
    dumps,
    hydrate,
    index_terms,
    next_seq_no,
    remove_memory,
    rewrite,
    row_doc,
    session_taken,
    touch_session,
    usable_params,
)
from memory_plugin.agentic.stores.vectors import Matrix, container_matrix, drop_matrices, load_vectors
from memory_plugin.auth import Principal
from memory_plugin.sqlite import KeptReads

T = TypeVar("T")


class SqliteAgenticStore(SqliteQueues, AgenticStore):
    def __init__(self, path: Path) -> None:
        #: The BM25 mirror of ``lt_fts`` (``bm25``), following every committed write the same way.
        self._lexical = LexicalIndex()
        self._lexical_build = MirrorBuild()
        self.db = LoggedDatabase(path, MIGRATIONS, self._mirror)
        #: container id -> its vectors by seq, each container's of its own dimension.  Changed on the event
        #: loop only, once the write that changes them has committed; searched in snapshots (``Matrix.rows``).
        self._indexes: dict[str, Matrix] = {}
        #: ``get_container``'s rows by container id and caller: every memory call reads its container first.
        self._container_reads: KeptReads[tuple[Any, ...], sqlite3.Row | None] = KeptReads()

    async def open(self, dimension: int) -> None:
        await self.db.open()
        self._indexes = await self.db.read(lambda c: load_vectors(c, self.db.path))
        await self.db.run(start_log)
        self._lexical_build = MirrorBuild()
        self._lexical_build.start(self.db.path, self._built)

    async def close(self) -> None:
        await self.db.close()
        drop_matrices(self._indexes)
        if self._lexical_build.done:  # no write can change it now: saved for the next open
            await asyncio.to_thread(save_mirror, mirror_file(self.db.path), self._lexical)
        await self._lexical_build.stop()
        self._lexical = LexicalIndex()

    def retention(self) -> RetentionStore:
        return SqliteRetention(self.db, self._unindex)

    # -- the mirrors (event loop) ------------------------------------------------------

    def _mirror(self, changes: list[Change], mark: int) -> None:
        if not self._lexical_build.keep(changes, mark):
            self._lexical.apply(changes, mark)

    def _built(self, index: LexicalIndex) -> None:
        self._lexical = index

    async def lexical_ready(self) -> bool:
        """Wait for the BM25 mirror (built after open; FTS5 ranks until then): whether it was built."""
        return await self._lexical_build.wait()

    def _index(self, container_id: str, dimension: int) -> Matrix:
        """The container's matrix: its dimension is its embedding model's, the built-in one's or a remote one's."""
        index = self._indexes.get(container_id)
        if index is None or index.size == 0 and index.dimension != dimension:
            index = self._indexes[container_id] = container_matrix(self.db.path, container_id, dimension)
        elif index.dimension != dimension:
            raise ValueError(
                f"memory container {container_id} holds {index.dimension}-dimensional vectors, not {dimension}"
            )
        return index

    def _unindex(self, container_id: str, seqs: Iterable[int]) -> None:
        index = self._indexes.get(container_id)
        if index is not None:
            index.remove(seqs)

    async def _write(self, work: Callable[[sqlite3.Connection], T], after: Callable[[T], None] | None = None) -> T:
        """``work`` in one transaction; ``after`` (the vector mirror) on the event loop once it is stored,
        also when the caller stopped waiting: the mirror follows every write that committed, and no other."""
        return await self.db.write(work, committed=after)

    # -- containers -------------------------------------------------------------------

    async def insert_container(self, owner: Principal, container_id: str, doc: dict[str, Any]) -> StoredDoc | None:
        def insert(c: sqlite3.Connection) -> StoredDoc | None:
            if c.execute("SELECT 1 FROM containers WHERE container_id = ?", (container_id,)).fetchone():
                return None
            seq_no = next_seq_no(c)
            c.execute(
                "INSERT INTO containers VALUES (?, ?, ?, ?, 1, ?)",
                (container_id, *owner_key(owner), dumps(doc), seq_no),
            )
            return StoredDoc(container_id, doc, 1, seq_no)

        return await self.db.write(insert, settled=self._container_reads.forget)

    async def get_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        key = (container_id, *usable_params(owner))
        sql = f"SELECT * FROM containers WHERE container_id = ? AND {CONTAINER_USABLE}"
        row = await self._container_reads.get(key, lambda: self.db.read(lambda c: c.execute(sql, key).fetchone()))
        return container_doc(row) if row else None

    async def find_container(self, organization_id: str, container_id: str) -> StoredDoc | None:
        sql = "SELECT * FROM containers WHERE container_id = ? AND organization_id = ?"
        row = await self.db.read(lambda c: c.execute(sql, (container_id, organization_id)).fetchone())
        return container_doc(row) if row else None

    async def update_container(self, owner: Principal, container_id: str, merge: Merge) -> StoredDoc | None:
        # Read, merged and written in one transaction on the one writer: no write can come in between.
        def update(c: sqlite3.Connection) -> StoredDoc | None:
            row = c.execute(
                f"SELECT * FROM containers WHERE container_id = ? AND {CONTAINER_USABLE}",
                (container_id, *usable_params(owner)),
            ).fetchone()
            if row is None:
                return None
            doc = merge(container_doc(row).source)
            seq_no = next_seq_no(c)
            c.execute(
                "UPDATE containers SET doc = ?, version = version + 1, seq_no = ? WHERE container_id = ?",
                (dumps(doc), seq_no, container_id),
            )
            return StoredDoc(container_id, doc, row["version"] + 1, seq_no)

        return await self.db.write(update, settled=self._container_reads.forget)

    async def delete_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        def delete(c: sqlite3.Connection) -> StoredDoc | None:
            row = c.execute(
                f"DELETE FROM containers WHERE {CONTAINER_OWNER} RETURNING *", (container_id, *owner_key(owner))
            ).fetchone()
            if row is None:
                return None
            sql = "SELECT seq FROM memories WHERE container_id = ? AND memory_type = ?"
            fts_delete(c, [seq for (seq,) in c.execute(sql, (container_id, LONG_TERM)).fetchall()])
            c.execute("DELETE FROM memories WHERE container_id = ?", (container_id,))
            c.execute("DELETE FROM infer_jobs WHERE container_id = ?", (container_id,))
            c.execute("DELETE FROM posted_scopes WHERE container_id = ?", (container_id,))
            seq_no = next_seq_no(c)
            return StoredDoc(container_id, json.loads(row["doc"]), row["version"] + 1, seq_no)

        def forget(result: StoredDoc | None) -> None:
            if result is not None:
                drop_matrices(self._indexes, container_id, discard=True)

        return await self.db.write(delete, settled=self._container_reads.forget, committed=forget)

    async def containers(self, owner: Principal) -> list[StoredDoc]:
        sql = "SELECT * FROM containers WHERE organization_id = ? AND user_id = ? ORDER BY rowid"
        return await self.db.read(lambda c: [container_doc(row) for row in c.execute(sql, owner_key(owner))])

    async def usable_containers(self, caller: Principal) -> list[StoredDoc]:
        sql = f"SELECT * FROM containers WHERE {CONTAINER_USABLE} ORDER BY rowid"
        return await self.db.read(lambda c: [container_doc(row) for row in c.execute(sql, usable_params(caller))])

    # -- memories -----------------------------------------------------------------------

    def _insert(
        self,
        c: sqlite3.Connection,
        owner: Principal,
        container_id: str,
        memory_type: str,
        memory_id: str,
        doc: dict[str, Any],
    ) -> StoredDoc:
        seq_no = next_seq_no(c)
        seq = c.execute(
            "INSERT INTO memories (container_id, memory_type, memory_id, organization_id, user_id, doc, version, seq_no, "
            "pending) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?) RETURNING seq",
            (
                container_id,
                memory_type,
                memory_id,
                *owner_key(owner),
                dumps(doc),
                seq_no,
                int(memory_type == LONG_TERM),
            ),
        ).fetchone()[0]
        index_postings(c, seq, container_id, memory_type, owner_key(owner), doc, new=True)
        if memory_type == LONG_TERM:
            index_terms(c, seq, doc)
            fts_put(c, seq, memory_text(doc), new=True)
        elif memory_type == HISTORY:
            index_history_terms(c, seq, doc)
        return StoredDoc(memory_id, doc, 1, seq_no, seq)

    def _select(
        self, c: sqlite3.Connection, owner: Principal, container_id: str, memory_type: str, memory_id: str
    ) -> sqlite3.Row | None:
        row: sqlite3.Row | None = c.execute(
            f"SELECT * FROM memories WHERE {MEMORY_OWNER} AND memory_id = ?",
            (container_id, memory_type, *owner_key(owner), memory_id),
        ).fetchone()
        return row

    def _has_container(self, c: sqlite3.Connection, owner: Principal, container_id: str) -> bool:
        """Checked inside a write's transaction, so a container deleted meanwhile gets nothing written.  The
        organisation's: the writer may be a role holder (the service checked its access before the write)."""
        sql = "SELECT 1 FROM containers WHERE container_id = ? AND organization_id = ?"
        return c.execute(sql, (container_id, owner.organization_id)).fetchone() is not None

    async def add_memory(self, owner: Principal, container_id: str, add: MemoryAdd) -> bool:
        session = add.session

        def write(c: sqlite3.Connection) -> bool:
            if not self._has_container(c, owner, container_id):
                return False
            if session is not None:
                # another writer's session of that id (a shared container) is neither touched nor revealed
                created = session.drawn or (
                    not touch_session(c, owner, container_id, session.session_id, session.touched_time)
                    and session.doc is not None
                    and not session_taken(c, container_id, session.session_id)
                )
                if created:
                    assert session.doc is not None
                    self._insert(c, owner, container_id, SESSIONS, session.session_id, session.doc)
                    session.created = True
            self._insert(c, owner, container_id, WORKING, add.working_id, add.working)
            if add.infer_request is not None:
                c.execute(
                    "INSERT INTO infer_jobs (container_id, organization_id, user_id, request) VALUES (?, ?, ?, ?)",
                    (container_id, *owner_key(owner), dumps(add.infer_request)),
                )
            return True

        return await self._write(write)

    async def create_session(
        self, owner: Principal, container_id: str, session_id: str, doc: dict[str, Any]
    ) -> bool | None:
        def create(c: sqlite3.Connection) -> bool | None:
            if not self._has_container(c, owner, container_id):
                return None
            if session_taken(c, container_id, session_id):
                return False
            self._insert(c, owner, container_id, SESSIONS, session_id, doc)
            return True

        return await self._write(create)

    async def get(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> StoredDoc | None:
        def read(c: sqlite3.Connection) -> StoredDoc | None:
            row = self._select(c, owner, container_id, memory_type, memory_id)
            return row_doc(row, "memory_id") if row else None

        return await self.db.read(read)

    async def sources(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str
    ) -> list[dict[str, Any]] | None:
        def read(c: sqlite3.Connection) -> list[dict[str, Any]] | None:
            row = self._select(c, owner, container_id, memory_type, memory_id)
            return sources_of(json.loads(row["doc"])) if row else None

        return await self.db.read(read)

    async def update(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str, merge: Merge
    ) -> StoredDoc | None:
        # Read, merged and written in one transaction on the one writer: no write can come in between.
        def update(c: sqlite3.Connection) -> tuple[StoredDoc | None, bool]:
            row = self._select(c, owner, container_id, memory_type, memory_id)
            if row is None:
                return None, False
            seq = row["seq"]
            current = json.loads(row["doc"])
            doc = merge(without_sources(current))
            reembed = text_changed(memory_type, current, doc)
            # hidden from the caller, who sent the doc back without it
            kept = {**doc, SOURCES: current[SOURCES]} if SOURCES in current else doc
            seq_no = rewrite(c, seq, kept, reembed=reembed)
            if memory_type == LONG_TERM:
                index_terms(c, seq, kept)
            return StoredDoc(memory_id, without_sources(doc), row["version"] + 1, seq_no, seq), reembed

        def unindex(result: tuple[StoredDoc | None, bool]) -> None:
            stored, reembed = result
            if stored is not None and reembed:
                self._unindex(container_id, [stored.seq])

        stored, _ = await self._write(update, unindex)
        return stored

    async def delete(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> StoredDoc | None:
        def delete(c: sqlite3.Connection) -> StoredDoc | None:
            row = self._select(c, owner, container_id, memory_type, memory_id)
            if row is None:
                return None
            remove_memory(c, row["seq"], memory_type)
            return StoredDoc(memory_id, json.loads(row["doc"]), row["version"] + 1, next_seq_no(c), row["seq"])

        def unindex(result: StoredDoc | None) -> None:
            if result is not None and memory_type == LONG_TERM:
                self._unindex(container_id, [result.seq])

        return await self._write(delete, unindex)

    async def docs(self, owner: Principal, container_id: str, memory_type: str) -> list[StoredDoc]:
        sql = f"SELECT seq, memory_id, doc, version, seq_no FROM memories WHERE {MEMORY_OWNER} ORDER BY seq"
        params = (container_id, memory_type, *owner_key(owner))
        return await self.db.read(lambda c: [row_doc(row, "memory_id") for row in c.execute(sql, params)])

    def indexed_field(self, path: str) -> bool:
        return indexed_path(path)

    async def docs_matching(
        self,
        owner: Principal,
        container_id: str,
        memory_type: str,
        required: ExactTerms,
    ) -> list[StoredDoc]:
        if not required:
            return await self.docs(owner, container_id, memory_type)
        return await read_posted(
            self.db,
            container_id,
            memory_type,
            lambda c: matching_docs(c, owner, container_id, memory_type, required, row_doc),
        )

    async def sorted_page(
        self,
        owner: Principal,
        container_id: str,
        memory_type: str,
        required: ExactTerms,
        sort: tuple[str, bool, int],
        count_up_to: int | None = None,
    ) -> tuple[int, list[StoredDoc]] | None:
        return await read_posted(
            self.db,
            container_id,
            memory_type,
            lambda c: sorted_page(c, owner, container_id, memory_type, required, sort, count_up_to, row_doc),
        )

    async def delete_ids(self, owner: Principal, container_id: str, memory_type: str, ids: Sequence[str]) -> int:
        def delete(c: sqlite3.Connection) -> list[int]:
            seqs: list[int] = []
            for part, marks in batches(ids):
                rows = c.execute(
                    f"DELETE FROM memories WHERE {MEMORY_OWNER} AND memory_id IN ({marks}) RETURNING seq",
                    (container_id, memory_type, *owner_key(owner), *part),
                ).fetchall()
                seqs.extend(row[0] for row in rows)
            if memory_type == LONG_TERM:
                fts_delete(c, seqs)
            if seqs:
                next_seq_no(c)
            return seqs

        def unindex(seqs: list[int]) -> None:
            if memory_type == LONG_TERM:
                self._unindex(container_id, seqs)

        deleted = await self._write(delete, unindex)
        return len(deleted)

    async def forget(self, owner: Principal, container_id: str, working_ids: Sequence[str]) -> Forgotten:
        ids = list(dict.fromkeys(working_ids))

        def work(c: sqlite3.Connection) -> tuple[Forgotten, list[int]]:
            return forget(c, owner, container_id, ids)

        forgotten, _ = await self._write(work, lambda result: self._unindex(container_id, result[1]))
        return forgotten

    async def embeddings(self, owner: Principal, container_id: str, ids: Sequence[str]) -> dict[str, list[float]]:
        def read(c: sqlite3.Connection) -> dict[str, list[float]]:
            out: dict[str, list[float]] = {}
            for part, marks in batches(ids):
                rows = c.execute(
                    f"SELECT memory_id, vector FROM memories WHERE {MEMORY_OWNER} AND memory_id IN ({marks}) "
                    "AND vector IS NOT NULL",
                    (container_id, LONG_TERM, *owner_key(owner), *part),
                )
                for memory_id, blob in rows:
                    out[memory_id] = [round(float(x), 7) for x in np.frombuffer(blob, dtype=np.float32)]
            return out

        return await self.db.read(read)

    # -- background work (the queues' reads: ``sqlite_queues``) ----------------------------------

    async def apply_infer(
        self, job: InferJob, changes: Sequence[LongTermChange], history: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        owner, container_id = job.owner, job.container_id

        def apply(c: sqlite3.Connection) -> list[int]:
            if c.execute("DELETE FROM infer_jobs WHERE job_id = ? RETURNING 1", (job.job_id,)).fetchone() is None:
                return []  # applied already, or its container is gone
            unindex: list[int] = []
            for change in changes:
                if change.event == "ADD" and change.doc is not None:
                    self._insert(c, owner, container_id, LONG_TERM, change.memory_id, change.doc)
                    continue
                row = self._select(c, owner, container_id, LONG_TERM, change.memory_id)
                if row is None:
                    continue
                if change.event == "UPDATE":
                    updated = change.applied_to(json.loads(row["doc"]))
                    rewrite(c, row["seq"], updated, reembed=True)
                    index_terms(c, row["seq"], updated)
                elif change.event == "DELETE":
                    remove_memory(c, row["seq"], LONG_TERM)
                unindex.append(row["seq"])
            for history_id, doc in history:
                self._insert(c, owner, container_id, HISTORY, history_id, doc)
            return unindex

        await self._write(apply, lambda seqs: self._unindex(container_id, seqs))

    # -- search -----------------------------------------------------------------------------

    async def knn(self, scope: LongTermScope, vector: np.ndarray, k: int) -> list[tuple[StoredDoc, float]]:
        query = normalised(vector)
        index = self._indexes.get(scope.container_id)
        if scope.empty or index is None or index.size == 0:
            return []
        if index.dimension != len(query):
            raise ValueError(
                f"memory container {scope.container_id} holds {index.dimension}-dimensional vectors; "
                f"the query has {len(query)}"
            )
        rows = index.rows()

        def search(c: sqlite3.Connection) -> list[tuple[StoredDoc, float]]:
            found = rows.search(query, k, candidates(c, scope), owner_key(scope.owner))
            return hydrate(c, scope, found, embedded=True)

        return await self.db.read(search)

    async def bm25(self, scope: LongTermScope, query: str, k: int) -> list[tuple[StoredDoc, float]]:
        lexical, tokenizer = self._lexical, self.db.tokenizer
        if scope.empty or not query_words(query):
            return []
        return await self.db.read(lambda c: bm25_top(c, scope, query, k, lexical, tokenizer))
