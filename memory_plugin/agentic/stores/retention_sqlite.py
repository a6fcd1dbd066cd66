"""Retention on the embedded store: a delete is conditional on the row's version, in one transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from memory_plugin.agentic.models import LONG_TERM
from memory_plugin.agentic.stores.base import StoredDoc, owner_of
from memory_plugin.agentic.stores.fts import LoggedDatabase, fts_delete
from memory_plugin.agentic.stores.retention import RetentionStore, Snapshot
from memory_plugin.agentic.stores.sqlite_tables import next_seq_no, row_doc
from memory_plugin.auth import Principal

#: Every doc of a type in a container, whoever wrote it (``RetentionStore``).
IN_CONTAINER = "container_id = ? AND memory_type = ? AND organization_id = ?"


class SqliteRetention(RetentionStore):
    """Made by ``SqliteAgenticStore.retention``, which hands over its database and its vector mirror's delete."""

    def __init__(self, db: LoggedDatabase, unindex: Callable[[str, list[int]], None]) -> None:
        """``unindex(container_id, seqs)``: drop deleted long-term rows from the container's vectors, once the
        delete has committed."""
        self.db = db
        self.unindex = unindex

    async def every_container(self) -> list[tuple[Principal, StoredDoc]]:
        def read(c: sqlite3.Connection) -> list[tuple[Principal, StoredDoc]]:
            rows = c.execute("SELECT * FROM containers ORDER BY rowid")
            return [(owner_of(row["organization_id"], row["user_id"]), row_doc(row, "container_id")) for row in rows]

        return await self.db.read(read)

    async def snapshot(self, organization_id: str, container_id: str, memory_type: str) -> list[Snapshot]:
        sql = f"SELECT seq, memory_id, doc, version FROM memories WHERE {IN_CONTAINER} ORDER BY seq"
        params = (container_id, memory_type, organization_id)

        def read(c: sqlite3.Connection) -> list[Snapshot]:
            return [
                Snapshot(row["memory_id"], json.loads(row["doc"]), (row["seq"], row["version"]))
                for row in c.execute(sql, params)
            ]

        return await self.db.read(read)

    async def delete_unchanged(
        self, organization_id: str, container_id: str, memory_type: str, docs: Sequence[Snapshot]
    ) -> list[str]:
        sql = f"DELETE FROM memories WHERE seq = ? AND version = ? AND {IN_CONTAINER} RETURNING seq"
        scope = (container_id, memory_type, organization_id)

        def delete(c: sqlite3.Connection) -> list[tuple[int, str]]:
            gone = [(row[0], doc.id) for doc in docs for row in c.execute(sql, (*doc.token, *scope)).fetchall()]
            if memory_type == LONG_TERM:
                fts_delete(c, [seq for seq, _ in gone])
            if gone:
                next_seq_no(c)
            return gone

        def unindex(gone: list[tuple[int, str]]) -> None:
            if memory_type == LONG_TERM:
                self.unindex(container_id, [seq for seq, _ in gone])

        if not docs:
            return []
        return [memory_id for _, memory_id in await self.db.write(delete, committed=unindex)]
