"""The embedded agentic store: SQLite + FTS5, with in-memory vectors.

Embedded layout (one SQLite file, WAL, ``synchronous=FULL``):

* ``containers`` and ``memories`` hold the documents as JSON; ``memories``
  has every type (sessions, working, long-term, history), keyed by
  ``(container_id, type, id)`` and by an AUTOINCREMENT ``seq`` that is the
  vector id and the rowid in FTS5.
* ``terms`` indexes long-term ``namespace.*``, ``tags.*``, ``strategy_id`` and
  ``namespace_size`` for the exact term filters of k-NN and BM25.
* ``lt_fts`` is an FTS5 table of long-term ``memory`` text (BM25).
* ``pending = 1`` marks a long-term memory whose embedding is not computed
  yet; ``infer_jobs`` holds inferring adds not yet applied.  Both are written
  in the same transaction as what caused them, and drained by background
  tasks that resume at start, so a SIGKILL loses nothing.
* Vectors are stored in SQLite (float32 BLOB, L2-normalised) and mirrored
  per container in a matrix, rebuilt at open: k-NN is exact, one BLAS
  matrix-vector product (over the term-filter candidates only, when there are
  filters).  A faiss flat index was measured 2-5x slower for one query at 100k
  vectors on this machine (it runs one query on one core), and HNSW would give
  up exactness for a size where exact search is fast enough.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memory_plugin.agentic.models import HISTORY, LONG_TERM, SESSIONS, WORKING, flat_object_terms, valid_unicode
from memory_plugin.agentic.stores.base import (
    AgenticStore,
    InferJob,
    LongTermChange,
    LongTermScope,
    MemoryAdd,
    PendingEmbedding,
    StoredDoc,
    memory_text,
    normalised,
    owner_key,
    owner_of,
    text_changed,
)
from memory_plugin.auth import Principal
from memory_plugin.sqlite import Database, run_script

T = TypeVar("T")


def _schema_v1(connection: sqlite3.Connection) -> None:
    run_script(
        connection,
        """
        CREATE TABLE containers (
            container_id TEXT PRIMARY KEY,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            doc TEXT NOT NULL,
            version INTEGER NOT NULL,
            seq_no INTEGER NOT NULL
        );
        CREATE INDEX containers_owner ON containers (organization_id, user_id);
        CREATE TABLE memories (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            container_id TEXT NOT NULL,
            memory_type TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            doc TEXT NOT NULL,
            version INTEGER NOT NULL,
            seq_no INTEGER NOT NULL,
            vector BLOB,
            pending INTEGER NOT NULL DEFAULT 0,
            UNIQUE (container_id, memory_type, memory_id)
        );
        CREATE INDEX memories_pending ON memories (pending) WHERE pending = 1;
        CREATE TABLE terms (
            seq INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
            field TEXT NOT NULL,
            value TEXT NOT NULL
        );
        CREATE INDEX terms_lookup ON terms (field, value, seq);
        CREATE INDEX terms_seq ON terms (seq);
        CREATE VIRTUAL TABLE lt_fts USING fts5 (memory, tokenize = 'unicode61 remove_diacritics 2');
        CREATE TABLE infer_jobs (
            job_id INTEGER PRIMARY KEY AUTOINCREMENT,
            container_id TEXT NOT NULL,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            request TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO counters VALUES ('seq_no', 0);
        """,
    )


MIGRATIONS = [_schema_v1]
_CONTAINER_OWNER = "container_id = ? AND organization_id = ? AND user_id = ?"
_MEMORY_OWNER = "container_id = ? AND memory_type = ? AND organization_id = ? AND user_id = ?"
#: Host parameters per statement, well under SQLite's limit.
_BATCH = 500


def _next_seq_no(c: sqlite3.Connection) -> int:
    return int(c.execute("UPDATE counters SET value = value + 1 WHERE name = 'seq_no' RETURNING value").fetchone()[0])


def _doc(row: sqlite3.Row, id_column: str) -> StoredDoc:
    seq = row["seq"] if "seq" in row.keys() else 0
    return StoredDoc(row[id_column], json.loads(row["doc"]), row["version"], row["seq_no"], seq)


def _dumps(doc: dict[str, Any]) -> str:
    # ASCII escapes keep lone surrogates (valid JSON, invalid UTF-8) storable.
    return json.dumps(doc, separators=(",", ":"))


def _batches(ids: Iterable[str]) -> Iterator[tuple[list[str], str]]:
    """Distinct ``ids`` in parts SQLite can bind, each with its ``?,?,...`` placeholders."""
    wanted = list(dict.fromkeys(ids))
    for start in range(0, len(wanted), _BATCH):
        part = wanted[start : start + _BATCH]
        yield part, ",".join("?" * len(part))


def _long_term_terms(doc: dict[str, Any]) -> list[tuple[str, str]]:
    pairs = flat_object_terms(doc)
    for name in ("strategy_id", "namespace_size", "strategy_type"):
        if doc.get(name) is not None:
            pairs.append((name, str(doc[name])))
    return pairs


def _index_terms(c: sqlite3.Connection, seq: int, doc: dict[str, Any]) -> None:
    """A long-term doc's exact terms, replacing any earlier ones."""
    c.execute("DELETE FROM terms WHERE seq = ?", (seq,))
    c.executemany(
        "INSERT INTO terms VALUES (?, ?, ?)",
        [(seq, valid_unicode(name), valid_unicode(value)) for name, value in _long_term_terms(doc)],
    )


def _rewrite(c: sqlite3.Connection, seq: int, doc: dict[str, Any], *, reembed: bool = False) -> int:
    """Store a doc's next version and return its seq_no; ``reembed`` (a long-term doc's text changed) drops its
    vector, queues the new text for embedding and re-indexes it for BM25."""
    seq_no = _next_seq_no(c)
    if reembed:
        c.execute(
            "UPDATE memories SET doc = ?, version = version + 1, seq_no = ?, vector = NULL, pending = 1 WHERE seq = ?",
            (_dumps(doc), seq_no, seq),
        )
        c.execute("UPDATE lt_fts SET memory = ? WHERE rowid = ?", (valid_unicode(memory_text(doc)), seq))
    else:
        c.execute(
            "UPDATE memories SET doc = ?, version = version + 1, seq_no = ? WHERE seq = ?", (_dumps(doc), seq_no, seq)
        )
    return seq_no


def _remove(c: sqlite3.Connection, seq: int, memory_type: str) -> None:
    c.execute("DELETE FROM memories WHERE seq = ?", (seq,))
    if memory_type == LONG_TERM:
        c.execute("DELETE FROM lt_fts WHERE rowid = ?", (seq,))


class _Matrix:
    """One container's vectors in a growable float32 matrix, by seq; deletions leave dead rows until compaction."""

    def __init__(self, dimension: int) -> None:
        self.vectors = np.zeros((256, dimension), dtype=np.float32)
        self.seqs = np.zeros(256, dtype=np.int64)
        self.live = np.zeros(256, dtype=bool)
        self.n = 0
        self.position: dict[int, int] = {}

    @property
    def size(self) -> int:
        return len(self.position)

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def add(self, seqs: np.ndarray, vectors: np.ndarray) -> None:
        self.remove(seqs.tolist())
        end = self.n + len(seqs)
        if end > len(self.seqs):
            self._resize(max(end, 2 * len(self.seqs)))
        self.vectors[self.n : end] = vectors
        self.seqs[self.n : end] = seqs
        self.live[self.n : end] = True
        for offset, seq in enumerate(seqs.tolist()):
            self.position[seq] = self.n + offset
        self.n = end

    def remove(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            position = self.position.pop(int(seq), None)
            if position is not None:
                self.live[position] = False
        if self.n > 1024 and self.size < self.n // 2:
            self._resize(max(256, 2 * self.size))

    def _resize(self, capacity: int) -> None:
        """New arrays holding the live rows only, in order."""
        keep = np.flatnonzero(self.live[: self.n])
        vectors = np.zeros((capacity, self.vectors.shape[1]), dtype=np.float32)
        seqs = np.zeros(capacity, dtype=np.int64)
        live = np.zeros(capacity, dtype=bool)
        vectors[: len(keep)], seqs[: len(keep)], live[: len(keep)] = self.vectors[keep], self.seqs[keep], True
        self.vectors, self.seqs, self.live, self.n = vectors, seqs, live, len(keep)
        self.position = {seq: position for position, seq in enumerate(seqs[: self.n].tolist())}

    def rows(self) -> _Rows:
        """The matrix as it is now, for a search on the reader thread while the event loop changes it: rows
        below ``n`` are never written again (a resize makes new arrays), and ``live`` is copied."""
        return _Rows(self.vectors[: self.n], self.seqs[: self.n], self.live[: self.n].copy())


@dataclass(frozen=True)
class _Rows:
    """A matrix's rows at one moment (``_Matrix.rows``)."""

    vectors: np.ndarray
    seqs: np.ndarray
    live: np.ndarray

    def search(self, query: np.ndarray, k: int, candidates: np.ndarray | None) -> list[tuple[int, float]]:
        """Top ``k`` ``(seq, cosine)`` among ``candidates`` (None: all), ties by seq."""
        if candidates is None:
            scores = self.vectors @ query
            scores[~self.live] = -np.inf
            seqs = self.seqs
        else:
            positions = np.flatnonzero(self.live & np.isin(self.seqs, candidates))
            if len(positions) == 0:
                return []
            scores = self.vectors[positions] @ query
            seqs = self.seqs[positions]
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        ordered = top[np.lexsort((seqs[top], -scores[top]))]
        return [(int(seqs[i]), float(scores[i])) for i in ordered if scores[i] > -np.inf]


def _load_vectors(c: sqlite3.Connection, path: Path) -> dict[str, _Matrix]:
    """Every container's matrix, from the stored vectors."""
    by_container: dict[str, tuple[list[int], list[bytes]]] = {}
    rows = c.execute("SELECT seq, container_id, vector FROM memories WHERE vector IS NOT NULL ORDER BY seq")
    for seq, container_id, blob in rows:
        seqs, blobs = by_container.setdefault(container_id, ([], []))
        seqs.append(seq)
        blobs.append(blob)
    indexes: dict[str, _Matrix] = {}
    for container_id, (seqs, blobs) in by_container.items():
        if len({len(blob) for blob in blobs}) > 1:
            raise RuntimeError(f"{path}: container {container_id} holds vectors of different dimensions")
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(seqs), -1)
        indexes[container_id] = _Matrix(vectors.shape[1])
        indexes[container_id].add(np.asarray(seqs, dtype=np.int64), vectors)
    return indexes


class SqliteAgenticStore(AgenticStore):
    def __init__(self, path: Path) -> None:
        self.db = Database(path, MIGRATIONS)
        #: container id -> its vectors by seq, each container's of its own dimension.  Changed on the event
        #: loop only, once the write that changes them has committed; searched in snapshots (``_Matrix.rows``).
        self._indexes: dict[str, _Matrix] = {}

    async def open(self, dimension: int) -> None:
        await self.db.open()
        self._indexes = await self.db.read(lambda c: _load_vectors(c, self.db.path))

    async def close(self) -> None:
        await self.db.close()
        self._indexes.clear()

    # -- the vector mirror (event loop) ------------------------------------------------

    def _index(self, container_id: str, dimension: int) -> _Matrix:
        """The container's matrix: its dimension is its embedding model's, the built-in one's or a remote one's."""
        index = self._indexes.get(container_id)
        if index is None or index.size == 0 and index.dimension != dimension:
            index = self._indexes[container_id] = _Matrix(dimension)
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
        """``work`` in one transaction; ``after`` (the vector mirror) on the event loop once it has settled,
        also when the caller stopped waiting, so that the mirror follows every write that committed (a group
        whose COMMIT fails, a full disk, may leave it ahead of the file until the next open)."""
        if after is None:
            return await self.db.write(work)
        results: list[T] = []

        def run(c: sqlite3.Connection) -> T:
            results.append(work(c))
            return results[0]

        return await self.db.write(run, settled=lambda: after(results[0]) if results else None)

    # -- containers -------------------------------------------------------------------

    async def insert_container(self, owner: Principal, container_id: str, doc: dict[str, Any]) -> StoredDoc | None:
        def insert(c: sqlite3.Connection) -> StoredDoc | None:
            if c.execute("SELECT 1 FROM containers WHERE container_id = ?", (container_id,)).fetchone():
                return None
            seq_no = _next_seq_no(c)
            c.execute(
                "INSERT INTO containers VALUES (?, ?, ?, ?, 1, ?)",
                (container_id, *owner_key(owner), _dumps(doc), seq_no),
            )
            return StoredDoc(container_id, doc, 1, seq_no)

        return await self._write(insert)

    async def get_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        def read(c: sqlite3.Connection) -> StoredDoc | None:
            row = c.execute(
                f"SELECT * FROM containers WHERE {_CONTAINER_OWNER}", (container_id, *owner_key(owner))
            ).fetchone()
            return _doc(row, "container_id") if row else None

        return await self.db.read(read)

    async def replace_container(self, owner: Principal, container_id: str, doc: dict[str, Any]) -> StoredDoc | None:
        def replace(c: sqlite3.Connection) -> StoredDoc | None:
            seq_no = _next_seq_no(c)
            row = c.execute(
                f"UPDATE containers SET doc = ?, version = version + 1, seq_no = ? WHERE {_CONTAINER_OWNER} "
                "RETURNING version",
                (_dumps(doc), seq_no, container_id, *owner_key(owner)),
            ).fetchone()
            return StoredDoc(container_id, doc, row[0], seq_no) if row else None

        return await self._write(replace)

    async def delete_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        def delete(c: sqlite3.Connection) -> StoredDoc | None:
            row = c.execute(
                f"DELETE FROM containers WHERE {_CONTAINER_OWNER} RETURNING *", (container_id, *owner_key(owner))
            ).fetchone()
            if row is None:
                return None
            c.execute(
                "DELETE FROM lt_fts WHERE rowid IN (SELECT seq FROM memories WHERE container_id = ? AND memory_type = ?)",
                (container_id, LONG_TERM),
            )
            c.execute("DELETE FROM memories WHERE container_id = ?", (container_id,))
            c.execute("DELETE FROM infer_jobs WHERE container_id = ?", (container_id,))
            seq_no = _next_seq_no(c)
            return StoredDoc(container_id, json.loads(row["doc"]), row["version"] + 1, seq_no)

        def forget(result: StoredDoc | None) -> None:
            if result is not None:
                self._indexes.pop(container_id, None)

        return await self._write(delete, forget)

    async def containers(self, owner: Principal) -> list[StoredDoc]:
        sql = "SELECT * FROM containers WHERE organization_id = ? AND user_id = ? ORDER BY rowid"
        return await self.db.read(lambda c: [_doc(row, "container_id") for row in c.execute(sql, owner_key(owner))])

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
        seq_no = _next_seq_no(c)
        seq = c.execute(
            "INSERT INTO memories (container_id, memory_type, memory_id, organization_id, user_id, doc, version, seq_no, "
            "pending) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?) RETURNING seq",
            (
                container_id,
                memory_type,
                memory_id,
                *owner_key(owner),
                _dumps(doc),
                seq_no,
                int(memory_type == LONG_TERM),
            ),
        ).fetchone()[0]
        if memory_type == LONG_TERM:
            _index_terms(c, seq, doc)
            c.execute("INSERT INTO lt_fts (rowid, memory) VALUES (?, ?)", (seq, valid_unicode(memory_text(doc))))
        return StoredDoc(memory_id, doc, 1, seq_no, seq)

    def _select(
        self, c: sqlite3.Connection, owner: Principal, container_id: str, memory_type: str, memory_id: str
    ) -> sqlite3.Row | None:
        row: sqlite3.Row | None = c.execute(
            f"SELECT * FROM memories WHERE {_MEMORY_OWNER} AND memory_id = ?",
            (container_id, memory_type, *owner_key(owner), memory_id),
        ).fetchone()
        return row

    def _has_container(self, c: sqlite3.Connection, owner: Principal, container_id: str) -> bool:
        """Checked inside a write's transaction, so a container deleted meanwhile gets nothing written."""
        sql = f"SELECT 1 FROM containers WHERE {_CONTAINER_OWNER}"
        return c.execute(sql, (container_id, *owner_key(owner))).fetchone() is not None

    async def add_memory(self, owner: Principal, container_id: str, add: MemoryAdd) -> bool:
        session = add.session

        def write(c: sqlite3.Connection) -> bool:
            if not self._has_container(c, owner, container_id):
                return False
            if session is not None:
                row = self._select(c, owner, container_id, SESSIONS, session.session_id)
                if row is None and session.doc is not None:
                    self._insert(c, owner, container_id, SESSIONS, session.session_id, session.doc)
                    session.created = True
                elif row is not None:
                    _rewrite(c, row["seq"], session.touched(json.loads(row["doc"])))
            self._insert(c, owner, container_id, WORKING, add.working_id, add.working)
            if add.infer_request is not None:
                c.execute(
                    "INSERT INTO infer_jobs (container_id, organization_id, user_id, request) VALUES (?, ?, ?, ?)",
                    (container_id, *owner_key(owner), _dumps(add.infer_request)),
                )
            return True

        return await self._write(write)

    async def create_session(
        self, owner: Principal, container_id: str, session_id: str, doc: dict[str, Any]
    ) -> bool | None:
        def create(c: sqlite3.Connection) -> bool | None:
            if not self._has_container(c, owner, container_id):
                return None
            # Session ids are unique per container, whoever asks: a custom id never overwrites.
            if c.execute(
                "SELECT 1 FROM memories WHERE container_id = ? AND memory_type = ? AND memory_id = ?",
                (container_id, SESSIONS, session_id),
            ).fetchone():
                return False
            self._insert(c, owner, container_id, SESSIONS, session_id, doc)
            return True

        return await self._write(create)

    async def get(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> StoredDoc | None:
        def read(c: sqlite3.Connection) -> StoredDoc | None:
            row = self._select(c, owner, container_id, memory_type, memory_id)
            return _doc(row, "memory_id") if row else None

        return await self.db.read(read)

    async def replace(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str, doc: dict[str, Any]
    ) -> StoredDoc | None:
        def replace(c: sqlite3.Connection) -> tuple[StoredDoc | None, bool]:
            row = self._select(c, owner, container_id, memory_type, memory_id)
            if row is None:
                return None, False
            seq = row["seq"]
            reembed = text_changed(memory_type, json.loads(row["doc"]), doc)
            seq_no = _rewrite(c, seq, doc, reembed=reembed)
            if memory_type == LONG_TERM:
                _index_terms(c, seq, doc)
            return StoredDoc(memory_id, doc, row["version"] + 1, seq_no, seq), reembed

        def unindex(result: tuple[StoredDoc | None, bool]) -> None:
            stored, reembed = result
            if stored is not None and reembed:
                self._unindex(container_id, [stored.seq])

        stored, _ = await self._write(replace, unindex)
        return stored

    async def delete(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> StoredDoc | None:
        def delete(c: sqlite3.Connection) -> StoredDoc | None:
            row = self._select(c, owner, container_id, memory_type, memory_id)
            if row is None:
                return None
            _remove(c, row["seq"], memory_type)
            return StoredDoc(memory_id, json.loads(row["doc"]), row["version"] + 1, _next_seq_no(c), row["seq"])

        def unindex(result: StoredDoc | None) -> None:
            if result is not None and memory_type == LONG_TERM:
                self._unindex(container_id, [result.seq])

        return await self._write(delete, unindex)

    async def docs(self, owner: Principal, container_id: str, memory_type: str) -> list[StoredDoc]:
        sql = f"SELECT seq, memory_id, doc, version, seq_no FROM memories WHERE {_MEMORY_OWNER} ORDER BY seq"
        params = (container_id, memory_type, *owner_key(owner))
        return await self.db.read(lambda c: [_doc(row, "memory_id") for row in c.execute(sql, params)])

    async def delete_ids(self, owner: Principal, container_id: str, memory_type: str, ids: Sequence[str]) -> int:
        def delete(c: sqlite3.Connection) -> list[int]:
            seqs: list[int] = []
            for part, marks in _batches(ids):
                rows = c.execute(
                    f"DELETE FROM memories WHERE {_MEMORY_OWNER} AND memory_id IN ({marks}) RETURNING seq",
                    (container_id, memory_type, *owner_key(owner), *part),
                ).fetchall()
                seqs.extend(row[0] for row in rows)
            if memory_type == LONG_TERM:
                c.executemany("DELETE FROM lt_fts WHERE rowid = ?", [(seq,) for seq in seqs])
            if seqs:
                _next_seq_no(c)
            return seqs

        def unindex(seqs: list[int]) -> None:
            if memory_type == LONG_TERM:
                self._unindex(container_id, seqs)

        deleted = await self._write(delete, unindex)
        return len(deleted)

    async def embeddings(self, owner: Principal, container_id: str, ids: Sequence[str]) -> dict[str, list[float]]:
        def read(c: sqlite3.Connection) -> dict[str, list[float]]:
            out: dict[str, list[float]] = {}
            for part, marks in _batches(ids):
                rows = c.execute(
                    f"SELECT memory_id, vector FROM memories WHERE {_MEMORY_OWNER} AND memory_id IN ({marks}) "
                    "AND vector IS NOT NULL",
                    (container_id, LONG_TERM, *owner_key(owner), *part),
                )
                for memory_id, blob in rows:
                    out[memory_id] = [round(float(x), 7) for x in np.frombuffer(blob, dtype=np.float32)]
            return out

        return await self.db.read(read)

    # -- background work ------------------------------------------------------------------

    async def pending_embeddings(self, limit: int, skip: Iterable[str] = ()) -> list[PendingEmbedding]:
        skipped = sorted(skip)[:_BATCH]
        sql = (
            "SELECT seq, organization_id, user_id, container_id, doc FROM memories WHERE pending = 1 "
            f"AND container_id NOT IN ({', '.join('?' * len(skipped))}) ORDER BY seq LIMIT ?"
        )

        def read(c: sqlite3.Connection) -> list[PendingEmbedding]:
            return [
                PendingEmbedding(seq, owner_of(organization, user), container_id, memory_text(json.loads(doc)))
                for seq, organization, user, container_id, doc in c.execute(sql, (*skipped, limit))
            ]

        return await self.db.read(read)

    async def pending_count(self) -> int:
        return int(
            await self.db.read(lambda c: c.execute("SELECT count(*) FROM memories WHERE pending = 1").fetchone()[0])
        )

    async def store_embeddings(self, rows: Sequence[tuple[Any, str, np.ndarray]]) -> int:
        def store(c: sqlite3.Connection) -> list[tuple[str, int, np.ndarray]]:
            stored = []
            for seq, text, vector in rows:
                row = c.execute(
                    "SELECT container_id, doc FROM memories WHERE seq = ? AND pending = 1", (seq,)
                ).fetchone()
                if row is None or memory_text(json.loads(row[1])) != text:
                    continue  # deleted or changed meanwhile: a newer embedding is pending
                unit = normalised(vector)
                c.execute("UPDATE memories SET vector = ?, pending = 0 WHERE seq = ?", (unit.tobytes(), seq))
                stored.append((row[0], seq, unit))
            return stored

        def index(stored: list[tuple[str, int, np.ndarray]]) -> None:
            for container_id, seq, unit in stored:
                self._index(container_id, len(unit)).add(np.asarray([seq], dtype=np.int64), unit.reshape(1, -1))

        stored = await self._write(store, index)
        return len(stored)

    async def infer_jobs(self, limit: int) -> list[InferJob]:
        def read(c: sqlite3.Connection) -> list[InferJob]:
            rows = c.execute("SELECT * FROM infer_jobs ORDER BY job_id LIMIT ?", (limit,))
            return [
                InferJob(
                    row["job_id"],
                    owner_of(row["organization_id"], row["user_id"]),
                    row["container_id"],
                    json.loads(row["request"]),
                    row["attempts"],
                )
                for row in rows
            ]

        return await self.db.read(read)

    async def count_infer_attempt(self, job: InferJob) -> None:
        await self._write(
            lambda c: c.execute("UPDATE infer_jobs SET attempts = attempts + 1 WHERE job_id = ?", (job.job_id,))
        )

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
                    _rewrite(c, row["seq"], change.applied_to(json.loads(row["doc"])), reembed=True)
                elif change.event == "DELETE":
                    _remove(c, row["seq"], LONG_TERM)
                unindex.append(row["seq"])
            for history_id, doc in history:
                self._insert(c, owner, container_id, HISTORY, history_id, doc)
            return unindex

        await self._write(apply, lambda seqs: self._unindex(container_id, seqs))

    # -- search -----------------------------------------------------------------------------

    def _candidates(self, c: sqlite3.Connection, scope: LongTermScope) -> np.ndarray | None:
        """Seqs matching every term (and among ``only_ids``, the owner's long-term docs of the container);
        None when nothing restricts.  Term matches may include other containers' seqs: the per-container
        vectors and the hydration by owner and container drop those."""
        if not scope.terms and scope.only_ids is None:
            return None
        # One statement whatever the number of terms (a chain of INTERSECTs or ANDs has SQLite limits).
        with_terms = (
            "SELECT seq FROM terms JOIN json_each(?) AS wanted"
            " ON terms.field = wanted.value ->> 0 AND terms.value = wanted.value ->> 1"
            " GROUP BY seq HAVING count(DISTINCT wanted.key) = ?"
        )
        wanted = json.dumps([[valid_unicode(name), valid_unicode(value)] for name, value in scope.terms])
        if scope.only_ids is None:
            rows = c.execute(with_terms, (wanted, len(scope.terms)))
            return np.asarray([row[0] for row in rows], dtype=np.int64)
        sql = f"SELECT seq FROM memories WHERE {_MEMORY_OWNER}"
        base: list[Any] = [scope.container_id, LONG_TERM, *owner_key(scope.owner)]
        if scope.terms:
            sql += f" AND seq IN ({with_terms})"
            base += [wanted, len(scope.terms)]
        seqs: list[int] = []
        for part, marks in _batches(scope.only_ids):
            seqs += [row[0] for row in c.execute(sql + f" AND memory_id IN ({marks})", [*base, *part])]
        return np.asarray(seqs, dtype=np.int64)

    def _hydrate(
        self, c: sqlite3.Connection, scope: LongTermScope, scored: list[tuple[int, float]], limit: int | None = None
    ) -> list[tuple[StoredDoc, float]]:
        """The scored seqs' docs, in order, keeping only the owner's long-term docs of the container."""
        out: list[tuple[StoredDoc, float]] = []
        for seq, score in scored:
            if limit is not None and len(out) >= limit:
                break
            row = c.execute(
                f"SELECT seq, memory_id, doc, version, seq_no FROM memories WHERE seq = ? AND {_MEMORY_OWNER}",
                (seq, scope.container_id, LONG_TERM, *owner_key(scope.owner)),
            ).fetchone()
            if row is not None:
                out.append((_doc(row, "memory_id"), score))
        return out

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
            return self._hydrate(c, scope, rows.search(query, k, self._candidates(c, scope)))

        return await self.db.read(search)

    async def bm25(self, scope: LongTermScope, query: str, k: int) -> list[tuple[StoredDoc, float]]:
        match = fts_query(query)

        def search(c: sqlite3.Connection) -> list[tuple[StoredDoc, float]]:
            candidates = self._candidates(c, scope)
            allowed = None if candidates is None else set(candidates.tolist())
            if allowed is not None and not allowed:
                return []
            # FTS5 ranks its matches fastest on its own; the ranked rows are read lazily and only the owner's
            # docs of this container (and of the term filter) are kept, until there are k.
            cursor = c.execute("SELECT rowid, -rank FROM lt_fts WHERE lt_fts MATCH ? ORDER BY rank", (match,))
            kept: list[tuple[StoredDoc, float]] = []
            try:
                while len(kept) < k:
                    rows = cursor.fetchmany(256)
                    if not rows:
                        break
                    scored = [(int(seq), float(score)) for seq, score in rows if allowed is None or seq in allowed]
                    kept += self._hydrate(c, scope, scored, limit=k - len(kept))
            finally:
                cursor.close()
            return kept

        return [] if match is None or scope.empty else await self.db.read(search)


def fts_query(text: str) -> str | None:
    """Free text as an FTS5 query: every word quoted (no operators), any of them may match, as ``match`` does."""
    words = [word for word in "".join(ch if ch.isalnum() else " " for ch in text).split() if word]
    if not words:
        return None
    return " OR ".join('"' + valid_unicode(word) + '"' for word in dict.fromkeys(words[:256]))
