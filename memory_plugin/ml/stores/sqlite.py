"""The ml documents in SQLite, beside memory in the data folder."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.files import create_private_file, make_private_dir, open_private
from memory_plugin.ml.stores.base import Kind, MLStore, Owned, StoreConflict, Stored
from memory_plugin.sqlite import Database, KeptReads, run_script

#: The master key's file in the data folder, 0600: not in the database whose credentials it seals.
MASTER_KEY_FILE = "ml-master.key"


def _schema_v1(connection: sqlite3.Connection) -> None:
    run_script(
        connection,
        """
        CREATE TABLE documents (
            kind TEXT NOT NULL,
            id TEXT NOT NULL,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            source TEXT NOT NULL,
            written INTEGER NOT NULL,
            PRIMARY KEY (kind, id)
        );
        CREATE INDEX documents_by_owner ON documents (organization_id, user_id, kind, written);
        CREATE UNIQUE INDEX documents_by_write ON documents (written);
        """,
    )


#: Documents list in the order they were last written, as a Lucene index lists them (a write re-indexes at the end).
_NEXT_WRITE = "(SELECT COALESCE(MAX(written), 0) + 1 FROM documents)"


def _owner(owner: Principal) -> tuple[str, str]:
    return owner.organization_id, owner.user_id or ""


class SqliteMLStore(MLStore):
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.db = Database(self.path, [_schema_v1])
        #: ``get``'s rows: an agentic add reads its container's model on every call.
        self._reads: KeptReads[tuple[str, ...], tuple[Any, ...] | None] = KeptReads()

    async def open(self) -> None:
        make_private_dir(self.path.parent)
        create_private_file(self.path)
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    async def master_key(self, proposed: bytes) -> bytes:
        path = self.path.parent / MASTER_KEY_FILE

        def keep() -> bytes:
            descriptor = open_private(path, os.O_RDWR)
            try:
                kept = os.pread(descriptor, 64, 0)
                if kept:
                    return kept
                os.pwrite(descriptor, proposed, 0)
                os.fsync(descriptor)
                return proposed
            finally:
                os.close(descriptor)

        return await self.db.run(lambda _: keep())

    async def create(self, kind: Kind, owner: Principal, doc_id: str, source: dict[str, Any]) -> None:
        def insert(connection: sqlite3.Connection) -> None:
            try:
                connection.execute(
                    f"INSERT INTO documents VALUES (?, ?, ?, ?, 1, ?, {_NEXT_WRITE})",
                    (kind, doc_id, *_owner(owner), json.dumps(source, ensure_ascii=False)),
                )
            except sqlite3.IntegrityError:
                raise StoreConflict(doc_id) from None

        await self.db.write(insert, settled=self._reads.forget)

    async def get(self, kind: Kind, owner: Principal, doc_id: str) -> Stored | None:
        key = (kind, doc_id, *_owner(owner))
        sql = "SELECT id, source, version FROM documents WHERE kind = ? AND id = ? AND organization_id = ? AND user_id = ?"
        row = await self._reads.get(key, lambda: self.db.read(lambda c: c.execute(sql, key).fetchone()))
        return Stored(row[0], json.loads(row[1]), row[2]) if row else None

    async def replace(self, kind: Kind, owner: Principal, current: Stored, source: dict[str, Any]) -> bool:
        def update(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                f"UPDATE documents SET source = ?, version = version + 1, written = {_NEXT_WRITE} "
                "WHERE kind = ? AND id = ? "
                "AND organization_id = ? AND user_id = ? AND version = ?",
                (json.dumps(source, ensure_ascii=False), kind, current.id, *_owner(owner), current.version),
            )
            return cursor.rowcount == 1

        return await self.db.write(update, settled=self._reads.forget)

    async def delete(self, kind: Kind, owner: Principal, doc_id: str) -> bool:
        def remove(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                "DELETE FROM documents WHERE kind = ? AND id = ? AND organization_id = ? AND user_id = ?",
                (kind, doc_id, *_owner(owner)),
            )
            return cursor.rowcount == 1

        return await self.db.write(remove, settled=self._reads.forget)

    async def all(self, kind: Kind, owner: Principal) -> list[Stored]:
        def select(connection: sqlite3.Connection) -> list[Stored]:
            rows = connection.execute(
                "SELECT id, source, version FROM documents WHERE kind = ? AND organization_id = ? AND user_id = ? "
                "ORDER BY written",
                (kind, *_owner(owner)),
            ).fetchall()
            return [Stored(row[0], json.loads(row[1]), row[2]) for row in rows]

        return await self.db.read(select)

    async def find(self, kind: Kind, organization_id: str, doc_id: str) -> Owned | None:
        def select(connection: sqlite3.Connection) -> Owned | None:
            row = connection.execute(
                "SELECT id, source, version, user_id FROM documents WHERE kind = ? AND id = ? AND organization_id = ?",
                (kind, doc_id, organization_id),
            ).fetchone()
            return _owned(organization_id, row) if row else None

        return await self.db.read(select)

    async def organization(self, kind: Kind, organization_id: str) -> list[Owned]:
        def select(connection: sqlite3.Connection) -> list[Owned]:
            rows = connection.execute(
                "SELECT id, source, version, user_id FROM documents WHERE kind = ? AND organization_id = ? "
                "ORDER BY written",
                (kind, organization_id),
            ).fetchall()
            return [_owned(organization_id, row) for row in rows]

        return await self.db.read(select)

    async def erase(self, owner: Principal) -> int:
        def remove(connection: sqlite3.Connection) -> int:
            return connection.execute(
                "DELETE FROM documents WHERE organization_id = ? AND user_id = ?", _owner(owner)
            ).rowcount

        return await self.db.write(remove, settled=self._reads.forget)


def _owned(organization_id: str, row: tuple[Any, ...]) -> Owned:
    owner = Principal(organization_id, row[3] or None)
    return Owned(owner, Stored(row[0], json.loads(row[1]), row[2]))
