"""One SQLite connection per database, driven from a dedicated thread.

SQLite connections are not safe to share between threads, and every call
blocks.  Giving each database a single-thread executor keeps the event loop
free and serialises writers without any locking of our own.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from memory_plugin.errors import storage_error
from memory_plugin.files import create_private_file, make_private_dir

T = TypeVar("T")
log = logging.getLogger(__name__)

#: A migration takes the connection and brings the schema up one version.
Migration = Callable[[sqlite3.Connection], None]


class Database:
    """A WAL-mode SQLite file with versioned migrations, used from asyncio."""

    def __init__(self, path: Path, migrations: Sequence[Migration]) -> None:
        self.path = Path(path)
        self._migrations = list(migrations)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"sqlite-{self.path.stem}")
        self._connection: sqlite3.Connection | None = None

    async def open(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._open)

    def _open(self) -> None:
        make_private_dir(self.path.parent)
        create_private_file(self.path)
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        connection.row_factory = sqlite3.Row
        connection.execute("PRAGMA journal_mode=WAL")
        # FULL: an acknowledged write survives a kill and a power cut alike.
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("PRAGMA busy_timeout=5000")
        self._connection = connection
        self._migrate(connection)

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
        """Run ``work(connection)`` on the database thread.

        A full disk or an unwritable data folder raises the typed service error
        (``InsufficientStorage``, ``Unavailable``) here, where it arises, so that
        every caller (HTTP or in-process) sees the same error.
        """
        connection = self._connection
        if connection is None:
            raise RuntimeError(f"database {self.path} is not open")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, work, connection)
        except (sqlite3.Error, OSError) as error:
            typed = storage_error(error)
            if typed is None:
                raise
            log.error("storage error on %s: %s", self.path, error)
            raise typed from error

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` inside one transaction: all of it is committed, or none."""

        def in_transaction(connection: sqlite3.Connection) -> T:
            with transaction(connection):
                return work(connection)

        return await self.run(in_transaction)

    async def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await asyncio.get_running_loop().run_in_executor(self._executor, connection.close)
        self._executor.shutdown(wait=True)


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
