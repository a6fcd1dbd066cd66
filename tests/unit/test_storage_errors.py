"""Storage failures become typed service errors where they arise, for HTTP and in-process callers alike."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from memory_plugin import MemoryPlugin
from memory_plugin.auth import Principal
from memory_plugin.errors import InsufficientStorage, NotFound, Unavailable
from memory_plugin.settings import load_settings
from memory_plugin.sqlite import Database, transaction
from tests.support.fake_embedder import FakeEmbedder


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (sqlite3.OperationalError("database or disk is full"), InsufficientStorage),
        (sqlite3.OperationalError("disk I/O error"), InsufficientStorage),
        (sqlite3.OperationalError("attempt to write a readonly database"), Unavailable),
        (OSError(errno.ENOSPC, "No space left on device"), InsufficientStorage),
        (OSError(errno.EROFS, "Read-only file system"), Unavailable),
    ],
)
async def test_database_raises_the_typed_error(tmp_path: Path, error: Exception, expected: type[Exception]) -> None:
    db = Database(tmp_path / "x.sqlite3", [])
    await db.open()
    try:

        def fail(connection: sqlite3.Connection) -> None:
            raise error

        with pytest.raises(expected) as caught:
            await db.run(fail)
        assert caught.value.__cause__ is error
    finally:
        await db.close()


async def test_other_sqlite_errors_stay_what_they_are(tmp_path: Path) -> None:
    db = Database(tmp_path / "x.sqlite3", [])
    await db.open()
    try:
        with pytest.raises(sqlite3.OperationalError):
            await db.run(lambda connection: connection.execute("SELECT * FROM missing"))
    finally:
        await db.close()


async def test_the_in_process_api_raises_typed_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(environ={}, data_dir=tmp_path / "data", http={"port": 0}, bridge={"enabled": False})
    alice = Principal("org-1", "alice")
    async with MemoryPlugin.open(settings, embedder=FakeEmbedder.with_default_tokenizer()) as plugin:  # type: ignore[arg-type]
        with pytest.raises(NotFound) as missing:
            await plugin.get_conversation(alice, "nope")
        assert (missing.value.kind, missing.value.id) == ("conversation", "nope")

        def full_disk(self: transaction) -> sqlite3.Connection:
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(transaction, "__enter__", full_disk)
        with pytest.raises(InsufficientStorage):
            await plugin.create_conversation(alice, "billing")
