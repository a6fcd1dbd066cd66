"""The embedded memory store: conversations and interactions in one SQLite file."""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Generic

from memory_plugin.auth import Principal
from memory_plugin.dates import isoformat, parse_stored
from memory_plugin.dsl import MESSAGE_INDEX, META_INDEX
from memory_plugin.memory.models import Conversation, Document, Interaction, Updated, merged
from memory_plugin.memory.stores.base import (
    MemoryStore,
    OutboxEntry,
    OutboxLag,
    SearchDocument,
    conversation_documents,
    evaluate_search,
    interaction_documents,
)
from memory_plugin.sqlite import Database, run_script


def _schema_v1(connection: sqlite3.Connection) -> None:
    run_script(
        connection,
        """
        CREATE TABLE conversations (
            conversation_id TEXT PRIMARY KEY,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            name TEXT NOT NULL,
            create_time TEXT NOT NULL,
            updated_time TEXT NOT NULL,
            additional_info TEXT
        );
        CREATE INDEX conversations_by_created
            ON conversations (organization_id, user_id, create_time DESC, conversation_id DESC);
        CREATE INDEX conversations_by_updated
            ON conversations (organization_id, user_id, updated_time DESC, conversation_id DESC);
        CREATE TABLE interactions (
            interaction_id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations (conversation_id) ON DELETE CASCADE,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            create_time TEXT NOT NULL,
            input TEXT,
            response TEXT,
            prompt_template TEXT,
            origin TEXT,
            additional_info TEXT,
            parent_interaction_id TEXT,
            trace_number INTEGER
        );
        CREATE INDEX interactions_by_conversation
            ON interactions (conversation_id, create_time, interaction_id);
        CREATE INDEX interactions_by_parent
            ON interactions (parent_interaction_id, trace_number);
        """,
    )


def _schema_v2(connection: sqlite3.Connection) -> None:
    """Memories as ml-commons 2.19 keeps them: an optional name, an application type, a version."""
    run_script(
        connection,
        """
        CREATE TABLE conversations_v2 (
            conversation_id TEXT PRIMARY KEY,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            name TEXT,
            create_time TEXT NOT NULL,
            updated_time TEXT NOT NULL,
            additional_info TEXT,
            application_type TEXT,
            version INTEGER NOT NULL DEFAULT 1
        );
        INSERT INTO conversations_v2 (
            conversation_id, organization_id, user_id, name, create_time, updated_time, additional_info
        )
        SELECT conversation_id, organization_id, user_id, name, create_time, updated_time, additional_info
        FROM conversations;
        DROP TABLE conversations;
        ALTER TABLE conversations_v2 RENAME TO conversations;
        CREATE INDEX conversations_by_created
            ON conversations (organization_id, user_id, create_time DESC, conversation_id DESC);
        CREATE INDEX conversations_by_updated
            ON conversations (organization_id, user_id, updated_time DESC, conversation_id DESC);
        ALTER TABLE interactions ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
        """,
    )


def _schema_v3(connection: sqlite3.Connection) -> None:
    """The history bridge's outbox: written in the transaction of the memory change it mirrors."""
    run_script(
        connection,
        """
        CREATE TABLE bridge_outbox (
            seq INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            interaction_id TEXT,
            enqueued_at REAL NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            not_before REAL NOT NULL DEFAULT 0
        );
        """,
    )


MIGRATIONS = [_schema_v1, _schema_v2, _schema_v3]

_OWNER = "organization_id = ? AND user_id = ?"


def _owner_params(owner: Principal) -> tuple[str, str]:
    return owner.organization_id, owner.user_id or ""


@functools.lru_cache(maxsize=1024)
def _owner(organization_id: str, user_id: str) -> Principal:
    """A row's owner: a page of rows has one, made once."""
    return Principal(organization_id, user_id or None)


# Rows are read by position, in the tables' column order (``SELECT *``; the INSERTs rely on it
# too): several times faster than by name, which a page of rows pays for every field.


def _tuples(c: sqlite3.Connection, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
    """``sql``'s rows as plain tuples: the readers below take rows by position, and a tuple is cheaper to make."""
    cursor = c.cursor()
    cursor.row_factory = None
    return cursor.execute(sql, params)


def _conversation(row: Sequence[Any]) -> Conversation:
    conversation_id, organization_id, user_id, name, created, updated, additional_info, application_type, version = row
    return Conversation(
        conversation_id,
        _owner(organization_id, user_id),
        name,
        parse_stored(created),
        parse_stored(updated),
        json.loads(additional_info) if additional_info else None,
        application_type,
        version,
    )


def _interaction(row: Sequence[Any]) -> Interaction:
    """An interaction from a row whose first columns are the table's (``SELECT *``, or ``i.*`` first).

    Fields are passed by position, in the model's order: a page builds many, and keywords cost more.
    """
    (
        interaction_id,
        conversation_id,
        organization_id,
        user_id,
        created,
        input,
        response,
        prompt_template,
        origin,
        additional_info,
        parent_interaction_id,
        trace_number,
        version,
    ) = row[:13]
    return Interaction(
        interaction_id,
        conversation_id,
        _owner(organization_id, user_id),
        parse_stored(created),
        input,
        response,
        prompt_template,
        origin,
        json.loads(additional_info) if additional_info is not None else None,
        parent_interaction_id,
        trace_number,
        version,
    )


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _stored(column: str, value: Any) -> Any:
    """A field's value as its column holds it."""
    if column == "additional_info":
        return _json_or_none(value)
    return isoformat(value) if isinstance(value, datetime) else value


def _apply(document: Document, changes: Mapping[str, Any]) -> Document:
    """``changes`` merged into ``document``'s fields as a partial document update merges them."""
    return replace(document, **{name: merged(getattr(document, name), value) for name, value in changes.items()})


@dataclass(frozen=True)
class _Table(Generic[Document]):
    """A table of documents: its name, its key column, how a row reads as a document, what an update writes."""

    name: str
    key: str
    read: Callable[[Sequence[Any]], Document]
    updatable: tuple[str, ...]

    def owned_row(
        self, c: sqlite3.Connection, document_id: str, owner: Principal, columns: str = "*"
    ) -> sqlite3.Row | None:
        """The row of ``document_id`` if ``owner`` owns it."""
        sql = f"SELECT {columns} FROM {self.name} WHERE {self.key} = ? AND {_OWNER}"
        row: sqlite3.Row | None = c.execute(sql, (document_id, *_owner_params(owner))).fetchone()
        return row

    def owned(self, c: sqlite3.Connection, document_id: str, owner: Principal) -> Document | None:
        row = self.owned_row(c, document_id, owner)
        return None if row is None else self.read(row)

    def update(
        self,
        c: sqlite3.Connection,
        document_id: str,
        owner: Principal,
        changes: Mapping[str, Any],
        written: Callable[[Document, Document], None] | None = None,
    ) -> Updated[Document] | None:
        """``changes`` merged into the owner's document and its updatable columns written, with a new version.

        Nothing is written when nothing changes (``noop``); ``written(before, after)`` runs in the
        transaction after a write.
        """
        current = self.owned(c, document_id, owner)
        if current is None:
            return None
        changed = _apply(current, changes)
        if changed == current:
            return Updated(current, "noop")
        changed = replace(changed, version=current.version + 1)
        values: list[Any] = [_stored(column, getattr(changed, column)) for column in self.updatable]
        assignments = ", ".join(f"{column} = ?" for column in (*self.updatable, "version"))
        c.execute(f"UPDATE {self.name} SET {assignments} WHERE {self.key} = ?", (*values, changed.version, document_id))
        if written is not None:
            written(current, changed)
        return Updated(changed, "updated")


CONVERSATIONS = _Table("conversations", "conversation_id", _conversation, ("name", "additional_info", "updated_time"))
INTERACTIONS = _Table("interactions", "interaction_id", _interaction, ("response", "additional_info"))


def _enqueue(
    c: sqlite3.Connection, kind: str, owner: Principal, conversation_id: str, interaction_id: str | None = None
) -> None:
    """An outbox entry, in the caller's transaction: it commits with the change, or neither does."""
    c.execute(
        "INSERT INTO bridge_outbox (kind, organization_id, user_id, conversation_id, interaction_id, enqueued_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (kind, *_owner_params(owner), conversation_id, interaction_id, time.time()),
    )


#: Due entries, each with its interaction as it is now (NULLs once it is gone): every
#: organisation's oldest first, then every organisation's second oldest, and so on, so that
#: one organisation's burst of memory writes does not hold another's interaction behind it.
_PENDING = (
    "SELECT i.*, o.seq, o.kind, o.organization_id AS entry_organization_id, o.user_id AS entry_user_id, "
    "o.conversation_id AS entry_conversation_id, o.enqueued_at, o.attempts "
    "FROM (SELECT *, row_number() OVER (PARTITION BY organization_id ORDER BY seq) AS turn "
    "FROM bridge_outbox WHERE not_before <= ?) o "
    "LEFT JOIN interactions i ON i.interaction_id = o.interaction_id "
    "ORDER BY o.turn, o.seq LIMIT ?"
)


def _entry(row: sqlite3.Row) -> OutboxEntry:
    return OutboxEntry(
        entry_id=str(row["seq"]),
        kind=row["kind"],
        owner=Principal(row["entry_organization_id"], row["entry_user_id"] or None),
        conversation_id=row["entry_conversation_id"],
        enqueued_at=row["enqueued_at"],
        attempts=row["attempts"],
        # Deleting a conversation deletes its interactions in the transaction that writes its delete entry.
        interaction=_interaction(row) if row["interaction_id"] is not None else None,
    )


class Versions:
    """Change counters for conversations, in a fixed number of slots.

    Conversations that share a slot share a counter: a write to one makes the
    other's cached pages look stale too, which costs a read and never serves
    an old page.  Memory stays fixed however many conversations there are.
    """

    SLOTS = 4096

    def __init__(self) -> None:
        self._counts = [0] * self.SLOTS

    def of(self, conversation_id: str) -> int:
        return self._counts[hash(conversation_id) % self.SLOTS]

    def bump(self, *conversation_ids: str) -> None:
        for conversation_id in conversation_ids:
            self._counts[hash(conversation_id) % self.SLOTS] += 1

    def bump_all(self) -> None:
        self._counts = [count + 1 for count in self._counts]


class SqliteMemoryStore(MemoryStore):
    """Its database file is this process's alone: every write goes through here, so the
    store knows when a conversation's pages change (:meth:`messages_version`)."""

    def __init__(self, path: Path, *, outbox: bool = False) -> None:
        self.db = Database(path, MIGRATIONS)
        self.outbox = outbox
        self.versions = Versions()

    def messages_version(self, conversation_id: str) -> int | None:
        return self.versions.of(conversation_id)

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    async def health(self) -> dict[str, Any]:
        count = await self.db.read(lambda c: c.execute("SELECT count(*) FROM conversations").fetchone()[0])
        return {"status": "green", "conversations": count}

    async def add_conversation(self, conversation: Conversation) -> None:
        organization_id, user_id = _owner_params(conversation.owner)
        row = (
            conversation.conversation_id,
            organization_id,
            user_id,
            conversation.name,
            isoformat(conversation.create_time),
            isoformat(conversation.updated_time),
            _json_or_none(conversation.additional_info),
            conversation.application_type,
            conversation.version,
        )
        await self.db.write(lambda c: c.execute("INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row))

    async def get_conversation(self, owner: Principal, conversation_id: str) -> Conversation | None:
        return await self.db.read(lambda c: CONVERSATIONS.owned(c, conversation_id, owner))

    async def list_conversations(
        self, owner: Principal, offset: int, limit: int, by: str = "create_time"
    ) -> list[Conversation]:
        column = {"create_time": "create_time", "updated_time": "updated_time"}[by]
        sql = (
            f"SELECT * FROM conversations WHERE {_OWNER} ORDER BY {column} DESC, conversation_id DESC LIMIT ? OFFSET ?"
        )
        params = (*_owner_params(owner), limit, offset)
        return await self.db.read(lambda c: [_conversation(row) for row in c.execute(sql, params)])

    async def update_conversation(
        self, owner: Principal, conversation_id: str, changes: Mapping[str, Any]
    ) -> Updated[Conversation] | None:
        return await self.db.write(lambda c: CONVERSATIONS.update(c, conversation_id, owner, changes))

    async def delete_conversation(self, owner: Principal, conversation_id: str) -> list[str] | None:
        def delete(c: sqlite3.Connection) -> list[str] | None:
            if not CONVERSATIONS.owned_row(c, conversation_id, owner, "1"):
                return None
            ids = [
                row[0]
                for row in c.execute(
                    "SELECT interaction_id FROM interactions WHERE conversation_id = ?", (conversation_id,)
                )
            ]
            c.execute("DELETE FROM interactions WHERE conversation_id = ?", (conversation_id,))
            c.execute("DELETE FROM conversations WHERE conversation_id = ?", (conversation_id,))
            if self.outbox and ids:
                _enqueue(c, "delete", owner, conversation_id)
            return ids

        return await self.db.write(delete, settled=lambda: self.versions.bump(conversation_id))

    async def erase_user(self, owner: Principal) -> tuple[int, int]:
        def erase(c: sqlite3.Connection) -> tuple[int, int]:
            messages = c.execute(f"DELETE FROM interactions WHERE {_OWNER}", _owner_params(owner)).rowcount
            memories = c.execute(f"DELETE FROM conversations WHERE {_OWNER}", _owner_params(owner)).rowcount
            return memories, messages

        return await self.db.write(erase, settled=self.versions.bump_all)

    async def add_interaction(self, interaction: Interaction) -> bool:
        organization_id, user_id = _owner_params(interaction.owner)
        created = isoformat(interaction.create_time)
        row = (
            interaction.interaction_id,
            interaction.conversation_id,
            organization_id,
            user_id,
            created,
            interaction.input,
            interaction.response,
            interaction.prompt_template,
            interaction.origin,
            _json_or_none(interaction.additional_info),
            interaction.parent_interaction_id,
            interaction.trace_number,
            interaction.version,
        )

        def add(c: sqlite3.Connection) -> bool:
            touched = c.execute(
                "UPDATE conversations SET updated_time = max(updated_time, ?), version = version + 1 "
                f"WHERE conversation_id = ? AND {_OWNER}",
                (created, interaction.conversation_id, organization_id, user_id),
            ).rowcount
            if not touched:
                return False
            c.execute("INSERT INTO interactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            if self.outbox:
                _enqueue(c, "index", interaction.owner, interaction.conversation_id, interaction.interaction_id)
            return True

        return await self.db.write(add, settled=lambda: self.versions.bump(interaction.conversation_id))

    async def get_interaction(self, owner: Principal, interaction_id: str) -> Interaction | None:
        return await self.db.read(lambda c: INTERACTIONS.owned(c, interaction_id, owner))

    async def list_interactions(
        self, owner: Principal, conversation_id: str, offset: int, limit: int, newest_first: bool
    ) -> list[Interaction] | None:
        direction = "DESC" if newest_first else "ASC"

        sql = (  # the conversation's id only if the owner's: the page is empty otherwise
            "SELECT * FROM interactions WHERE trace_number IS NULL AND conversation_id = "
            f"(SELECT conversation_id FROM conversations WHERE conversation_id = ? AND {_OWNER}) "
            f"ORDER BY create_time {direction}, interaction_id {direction} LIMIT ? OFFSET ?"
        )
        params = (conversation_id, *_owner_params(owner), limit, offset)

        def read(c: sqlite3.Connection) -> list[Interaction] | None:
            # One statement checks the owner and reads the page; only an empty page needs to ask which it was.
            page = [_interaction(row) for row in _tuples(c, sql, params)]
            if not page and not CONVERSATIONS.owned_row(c, conversation_id, owner, "1"):
                return None
            return page

        return await self.db.read(read)

    async def list_traces(
        self, owner: Principal, interaction_id: str, offset: int, limit: int
    ) -> list[Interaction] | None:
        def read(c: sqlite3.Connection) -> list[Interaction] | None:
            if not INTERACTIONS.owned_row(c, interaction_id, owner, "1"):
                return None
            rows = c.execute(  # a trace names its parent freely: only the owner's own traces are listed
                f"SELECT * FROM interactions WHERE parent_interaction_id = ? AND {_OWNER} "
                "ORDER BY trace_number ASC, create_time ASC, interaction_id ASC LIMIT ? OFFSET ?",
                (interaction_id, *_owner_params(owner), limit, offset),
            )
            return [_interaction(row) for row in rows]

        return await self.db.read(read)

    async def update_interaction(
        self, owner: Principal, interaction_id: str, changes: Mapping[str, Any]
    ) -> Updated[Interaction] | None:
        def update(c: sqlite3.Connection) -> Updated[Interaction] | None:
            def reindex(before: Interaction, after: Interaction) -> None:
                if self.outbox and after.response != before.response:  # the record holds input and response
                    _enqueue(c, "index", owner, after.conversation_id, interaction_id)

            updated = INTERACTIONS.update(c, interaction_id, owner, changes, reindex)
            if updated is not None:
                touched.append(updated.document.conversation_id)
            return updated

        touched: list[str] = []  # known inside the transaction only
        return await self.db.write(update, settled=lambda: self.versions.bump(*touched))

    async def outbox_pending(self, limit: int, now: float) -> list[OutboxEntry]:
        return await self.db.read(lambda c: [_entry(row) for row in c.execute(_PENDING, (now, limit))])

    async def outbox_done(self, entries: Sequence[OutboxEntry]) -> None:
        seqs = [(int(entry.entry_id),) for entry in entries]
        await self.db.write(lambda c: c.executemany("DELETE FROM bridge_outbox WHERE seq = ?", seqs))

    async def outbox_retry(self, entries: Sequence[OutboxEntry], not_before: float) -> None:
        rows = [(entry.attempts + 1, not_before, int(entry.entry_id)) for entry in entries]
        await self.db.write(
            lambda c: c.executemany("UPDATE bridge_outbox SET attempts = ?, not_before = ? WHERE seq = ?", rows)
        )

    async def outbox_lag(self) -> OutboxLag:
        def read(c: sqlite3.Connection) -> OutboxLag:
            count, oldest = c.execute(
                "SELECT count(*), (SELECT enqueued_at FROM bridge_outbox ORDER BY seq LIMIT 1) FROM bridge_outbox"
            ).fetchone()
            return OutboxLag(count, oldest)

        return await self.db.read(read)

    async def search_conversations(self, owner: Principal, body: Mapping[str, Any] | None) -> dict[str, Any]:
        async def documents() -> list[SearchDocument]:
            sql = f"SELECT * FROM conversations WHERE {_OWNER}"
            rows = await self.db.read(lambda c: [_conversation(row) for row in c.execute(sql, _owner_params(owner))])
            return conversation_documents(rows)  # rowid (insertion) order: ties keep it

        return await evaluate_search(body, META_INDEX, documents)

    async def search_interactions(
        self, owner: Principal, conversation_id: str, body: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        async def documents() -> list[SearchDocument]:
            sql = f"SELECT * FROM interactions WHERE {_OWNER} AND conversation_id = ?"
            params = (*_owner_params(owner), conversation_id)
            return interaction_documents(
                await self.db.read(lambda c: [_interaction(row) for row in c.execute(sql, params)])
            )

        return await evaluate_search(body, MESSAGE_INDEX, documents, memory_id=conversation_id)
