"""Two SQLite connections per database, each driven from its own thread (and one per worker thread
that reads in place, ``read_here``).

SQLite connections are not safe to share between threads, and every call
blocks.  Each database has a writer thread that owns the connection every
change goes through, and a reader thread with a read-only connection: in WAL
mode it reads while the writer commits, so reads never queue behind an fsync.
Read-only connections map the file into memory, and fill the map as they open (``preload``).
The event loop queues work for a thread and is woken once per batch of
finished work, not once per call.  Queued writes share one transaction and
one fsync (group commit): each runs inside its own savepoint, so a write that
fails is undone alone, and none is acknowledged before the COMMIT that makes
it durable has returned; a read that starts after that sees it.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Hashable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

from memory_plugin.errors import ServiceError, storage_error
from memory_plugin.files import create_private_file, make_private_dir
from memory_plugin.preload import preload_in_background
from memory_plugin.versioned_cache import VersionedCache

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
log = logging.getLogger(__name__)

#: A migration takes the connection and brings the schema up one version.
Migration = Callable[[sqlite3.Connection], None]

#: The most jobs one wake-up of a database thread takes on, and so the largest
#: group commit: enough for any concurrency a server sees, few enough that a group
#: never holds its first writer for long.
MAX_BATCH = 128
#: How much of the file a read-only connection maps into memory (SQLite caps it at its own maximum).
READ_MAP_BYTES = 1 << 40


class KeptReads(Generic[K, T]):
    """Point reads kept in memory until a write of what they read ends: ``forget`` is that write's ``settled``
    hook, and moves the version every kept read was made at (``VersionedCache``).  Only for a file this process
    alone writes (the data folder is locked to one).  The version is taken before the read, so a read still
    under way when such a write ends is not kept and no read answers anything older than an acknowledged
    write; the values must not change once read (rows, not decoded documents)."""

    def __init__(self, limit: int = 1024) -> None:
        # Each read costs 1 of ``limit``, kept in a 1-tuple so that an absence (None) is kept too.
        self._cache: VersionedCache[tuple[T]] = VersionedCache(limit, entry_share=limit)
        self._writes = 0

    def __len__(self) -> int:
        return len(self._cache)

    async def get(self, key: K, read: Callable[[], Awaitable[T]]) -> T:
        writes = self._writes
        kept = self._cache.get(key, writes)
        if kept is not None:
            return kept[0]
        value = await read()
        self._cache.put(key, writes, (value,), 1)
        return value

    def forget(self) -> None:
        self._writes += 1


class _Job(Generic[T]):
    """Work for a database thread, and what became of it."""

    __slots__ = ("work", "future", "write", "settled", "committed", "result", "error")

    def __init__(
        self,
        work: Callable[[sqlite3.Connection], T],
        future: asyncio.Future[T],
        write: bool,
        settled: Callable[[], None] | None = None,
        committed: Callable[[T], None] | None = None,
    ) -> None:
        self.work = work
        self.future = future
        self.write = write
        self.settled = settled
        self.committed = committed
        self.result: T | None = None
        self.error: BaseException | None = None


class _Stop:
    """Queued by ``close``: the thread closes its connection and ends."""


class _Lane:
    """A database thread, the connection it owns, and the work queued for it."""

    __slots__ = ("queue", "thread", "connection")

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[_Job[Any] | _Stop] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.connection: sqlite3.Connection | None = None


class _GroupLost(Exception):
    """SQLite rolled the whole group's transaction back (a full disk, an I/O error) inside a write."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Database:
    """A WAL-mode SQLite file with versioned migrations, used from asyncio."""

    def __init__(self, path: Path, migrations: Sequence[Migration]) -> None:
        self.path = Path(path)
        self._migrations = list(migrations)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer = _Lane()
        self._reader = _Lane()
        #: ``read_here``'s connections, one per worker thread that read, closed with the database.
        self._local = threading.local()
        self._worker_connections: list[sqlite3.Connection] = []
        self._worker_lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return self._writer.connection is not None

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            self._start(self._writer, f"sqlite-{self.path.stem}")
            await self._submit(self._writer, self._open_writer, write=False)
            self._start(self._reader, f"sqlite-{self.path.stem}-read")
            await self._submit(self._reader, self._open_reader, write=False)
        except BaseException:
            await self.close()
            raise

    def _start(self, lane: _Lane, name: str) -> None:
        lane.thread = threading.Thread(target=self._serve, args=(lane,), name=name, daemon=True)
        lane.thread.start()

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        connection.row_factory = sqlite3.Row
        connection.execute("PRAGMA busy_timeout=5000")
        return connection

    def _open_writer(self, _: sqlite3.Connection | None) -> None:
        make_private_dir(self.path.parent)
        create_private_file(self.path)
        connection = self._connect()
        connection.execute("PRAGMA journal_mode=WAL")
        # FULL: an acknowledged write survives a kill and a power cut alike.
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("PRAGMA foreign_keys=ON")
        self._writer.connection = connection
        self._migrate(connection)

    def _open_reader(self, _: sqlite3.Connection | None) -> None:
        """After the writer has made the file, set WAL mode and migrated it."""
        self._reader.connection = self._connect_reader()

    def _connect_reader(self) -> sqlite3.Connection:
        connection = self._connect()
        connection.execute("PRAGMA query_only=ON")
        # Pages read through a memory map, not a read() each: ten hits scattered over a 2 GB file took
        # 2-5 ms to read here, 0.1-0.3 ms mapped (SQLite maps at most its compiled maximum, 2 GB).
        connection.execute(f"PRAGMA mmap_size={READ_MAP_BYTES}")
        # SQLite maps the file at its first read of a page past the first (a table's root), then fills the map
        table = connection.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND instr(name, '\"') = 0 LIMIT 1"
        ).fetchone()
        if table is not None:
            connection.execute(f'SELECT 1 FROM "{table[0]}" LIMIT 1').fetchall()
            preload_in_background(self.path)
        return connection

    def _migrate(self, connection: sqlite3.Connection) -> None:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > len(self._migrations):
            raise RuntimeError(
                f"{self.path} has schema version {version}, newer than this build knows ({len(self._migrations)})"
            )
        for number, migration in enumerate(self._migrations[version:], start=version + 1):
            with transaction(connection):
                migration(connection)
                connection.execute(f"PRAGMA user_version={number}")

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work(connection)`` on the writer's thread, outside any transaction of ours.

        A full disk or an unwritable data folder raises the typed service error
        (``InsufficientStorage``, ``Unavailable``) here, where it arises, so that
        every caller (HTTP or in-process) sees the same error.
        """
        self._require_open()
        return await self._submit(self._writer, work, write=False)

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the read-only connection, beside the writer: it never waits for a commit.

        Each statement reads the latest committed state, so every write
        acknowledged before the call is seen.  ``work`` must only read (the
        connection refuses changes) and needs no state of the writer's thread.
        """
        self._require_open()
        return await self._submit(self._reader, work, write=False)

    def read_here(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` now, on a read-only connection of the calling worker thread (never the event loop's).

        For work already off the loop, a search on its pool thread: handing the
        read to the reader thread and back costs two thread wake-ups, a tenth of
        a millisecond on a 1 ms search.  Reads as ``read`` does.
        """
        self._require_open()
        connection = getattr(self._local, "connection", None)
        try:
            if connection is None:
                connection = self._connect_reader()
                with self._worker_lock:
                    self._worker_connections.append(connection)
                self._local.connection = connection
            return work(connection)
        except (sqlite3.Error, OSError) as error:
            typed = self._storage_error(error)
            if typed is None:
                raise
            raise typed from error

    async def write(
        self,
        work: Callable[[sqlite3.Connection], T],
        *,
        settled: Callable[[], None] | None = None,
        committed: Callable[[T], None] | None = None,
    ) -> T:
        """Run ``work`` inside a transaction: all of it is committed, or none.

        Writes queued together share one transaction and one fsync.  ``work`` runs
        in its own savepoint: if it raises, only its own changes are undone and
        its neighbours commit.  Nothing returns before the COMMIT is durable; a
        COMMIT that fails (a full disk) fails every write of the group with it.

        ``settled`` runs on the event loop once the transaction has ended, before
        the caller hears of it, and also when the caller stopped waiting (a
        cancelled request whose write still commits): what caches a read must
        forget, it forgets there.  ``committed`` runs there too, with ``work``'s result, only if the
        write is stored: what mirrors the file in memory follows it there, never ahead of it.
        """
        self._require_open()
        return await self._submit(self._writer, work, write=True, settled=settled, committed=committed)

    def _require_open(self) -> None:
        if self._writer.connection is None or self._reader.connection is None:
            raise RuntimeError(f"database {self.path} is not open")

    async def _submit(
        self,
        lane: _Lane,
        work: Callable[[sqlite3.Connection], T],
        *,
        write: bool,
        settled: Callable[[], None] | None = None,
        committed: Callable[[T], None] | None = None,
    ) -> T:
        assert self._loop is not None
        future: asyncio.Future[T] = self._loop.create_future()
        lane.queue.put(_Job(work, future, write, settled, committed))
        try:
            return await future
        except (sqlite3.Error, OSError) as error:
            typed = self._storage_error(error)
            if typed is None:
                raise
            raise typed from error

    def _storage_error(self, error: sqlite3.Error | OSError) -> ServiceError | None:
        """The typed service error a storage failure raises (logged here), or None for any other error."""
        typed = storage_error(error)
        if typed is not None:
            log.error("storage error on %s: %s", self.path, error)
        return typed

    async def close(self) -> None:
        """Close every connection; ``read_here``'s threads must have stopped reading."""
        with self._worker_lock:
            workers, self._worker_connections = self._worker_connections, []
            self._local = threading.local()
        for connection in workers:
            connection.close()
        for lane in (self._reader, self._writer):
            thread, lane.thread = lane.thread, None
            if thread is not None:
                lane.queue.put(_Stop())
                await asyncio.to_thread(thread.join)
            lane.connection = None

    # -- the database threads -----------------------------------------------------------

    def _serve(self, lane: _Lane) -> None:
        """Take whatever is queued, run it (reads first, then the writes as one group), report it."""
        stopping = False
        while not stopping:
            batch = [lane.queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(lane.queue.get_nowait())
                except queue.Empty:
                    break
            jobs = [job for job in batch if isinstance(job, _Job)]
            stopping = len(jobs) < len(batch)
            for job in jobs:
                if not job.write:
                    self._run(job, lane.connection)
            writes = [job for job in jobs if job.write]
            if writes:
                self._commit_group(writes, lane.connection)
            if jobs:
                self._report(jobs)
        leftovers: list[_Job[Any]] = []
        while True:  # work queued after close: refuse it, never leave it waiting
            try:
                item = lane.queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Job):
                item.error = RuntimeError(f"database {self.path} is closed")
                leftovers.append(item)
        if lane.connection is not None:
            lane.connection.close()
        if leftovers:
            self._report(leftovers)

    def _run(self, job: _Job[Any], connection: sqlite3.Connection | None) -> None:
        try:
            job.result = job.work(connection)  # type: ignore[arg-type]  # None only while opening
        except BaseException as error:
            job.error = error

    def _commit_group(self, writes: list[_Job[Any]], connection: sqlite3.Connection | None) -> None:
        if connection is None:
            for job in writes:
                job.error = RuntimeError(f"database {self.path} is not open")
            return
        try:
            with transaction(connection):
                for job in writes:
                    connection.execute("SAVEPOINT write")
                    try:
                        job.result = job.work(connection)
                    except BaseException as error:
                        job.error = error
                        if not connection.in_transaction:
                            raise _GroupLost(error) from error
                        connection.execute("ROLLBACK TO write")
                    connection.execute("RELEASE write")
        except BaseException as error:
            # The group is not stored: every write that had not failed on its own
            # fails with what undid it (the statement's or the COMMIT's error).
            cause = error.error if isinstance(error, _GroupLost) else error
            for job in writes:
                if job.error is None:
                    job.error = cause
                    job.result = None

    def _report(self, jobs: list[_Job[Any]]) -> None:
        """Wake the event loop once for the whole batch."""
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(_settle, jobs)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


def _settle(jobs: list[_Job[Any]]) -> None:
    for job in jobs:
        hooks = [job.settled] if job.settled is not None else []
        if job.committed is not None and job.error is None:
            hooks.append(partial(job.committed, job.result))
        for hook in hooks:
            try:
                hook()
            except Exception:  # a bug in a hook must not leave the batch's callers waiting
                log.exception("a write's hook failed on %s", job.work)
        if job.future.done():  # the caller was cancelled
            continue
        if job.error is not None:
            job.future.set_exception(job.error)
        else:
            job.future.set_result(job.result)


def run_script(connection: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated statements inside the current transaction.

    ``executescript`` would commit first, which breaks atomic migrations.
    """
    for statement in script.split(";"):
        if statement.strip():
            connection.execute(statement)


class transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any exception."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def __enter__(self) -> sqlite3.Connection:
        self._connection.execute("BEGIN IMMEDIATE")
        return self._connection

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            try:
                self._connection.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        else:
            self._rollback()

    def _rollback(self) -> None:
        # SQLite rolls a transaction back by itself on some errors (SQLITE_FULL,
        # SQLITE_IOERR, ...).  A second ROLLBACK would then fail with "cannot
        # rollback - no transaction is active" and hide the error that matters
        # (a full disk, which the HTTP layer turns into a 507).
        if self._connection.in_transaction:
            try:
                self._connection.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("ROLLBACK failed on %s", self._connection)


def _varint(blob: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint (big-endian 7-bit groups, a ninth byte of 8 bits)."""
    value = 0
    for index in range(8):
        byte = blob[at + index]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + index + 1
    return (value << 8) | blob[at + 8], at + 9


def fts5_totals(c: sqlite3.Connection, table: str) -> tuple[int, int]:
    """An FTS5 table's own (rows, tokens): its averages record, which its ``bm25()`` divides."""
    row = c.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    rows, at = _varint(row[0], 0)
    tokens, _ = _varint(row[0], at)
    return rows, tokens
