"""The embedded memory store's tables: the schema and its migrations, rows read as models and
models written as rows, and the statements the store's reads and writes share.

Apart from the store (``sqlite.py``) because they are the file's layout, which changes only with
a migration, while the store is the order of operations in each transaction over it.

Rows are read by position, in the tables' column order (``SELECT *``; the store's INSERTs rely on
it too): several times faster than by name, which a page of rows pays for every field.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Generic

from memory_plugin.auth import Principal
from memory_plugin.dates import isoformat, parse_stored
from memory_plugin.memory.models import Conversation, Document, Interaction, Updated, merged
from memory_plugin.memory.stores.base import OutboxEntry
from memory_plugin.sqlite import run_script


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

#: The condition that a row is the owner's; its parameters are ``owner_params(owner)``.
OWNER = "organization_id = ? AND user_id = ?"


def owner_params(owner: Principal) -> tuple[str, str]:
    return owner.organization_id, owner.user_id or ""


@functools.lru_cache(maxsize=1024)
def _owner(organization_id: str, user_id: str) -> Principal:
    """A row's owner: a page of rows has one, made once."""
    return Principal(organization_id, user_id or None)


def tuple_rows(c: sqlite3.Connection, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
    """``sql``'s rows as plain tuples: the readers below take rows by position, and a tuple is cheaper to make."""
    cursor = c.cursor()
    cursor.row_factory = None
    return cursor.execute(sql, params)


def read_conversation(row: Sequence[Any]) -> Conversation:
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


def read_interaction(row: Sequence[Any]) -> Interaction:
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


def json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _stored(column: str, value: Any) -> Any:
    """A field's value as its column holds it."""
    if column == "additional_info":
        return json_or_none(value)
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
        sql = f"SELECT {columns} FROM {self.name} WHERE {self.key} = ? AND {OWNER}"
        row: sqlite3.Row | None = c.execute(sql, (document_id, *owner_params(owner))).fetchone()
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


CONVERSATIONS = _Table(
    "conversations", "conversation_id", read_conversation, ("name", "additional_info", "updated_time")
)
INTERACTIONS = _Table("interactions", "interaction_id", read_interaction, ("response", "additional_info"))


def enqueue(
    c: sqlite3.Connection, kind: str, owner: Principal, conversation_id: str, interaction_id: str | None = None
) -> None:
    """An outbox entry, in the caller's transaction: it commits with the change, or neither does."""
    c.execute(
        "INSERT INTO bridge_outbox (kind, organization_id, user_id, conversation_id, interaction_id, enqueued_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (kind, *owner_params(owner), conversation_id, interaction_id, time.time()),
    )


#: Due entries, each with its interaction as it is now (NULLs once it is gone): every
#: organisation's oldest first, then every organisation's second oldest, and so on, so that
#: one organisation's burst of memory writes does not hold another's interaction behind it.
PENDING_ENTRIES = (
    "SELECT i.*, o.seq, o.kind, o.organization_id AS entry_organization_id, o.user_id AS entry_user_id, "
    "o.conversation_id AS entry_conversation_id, o.enqueued_at, o.attempts "
    "FROM (SELECT *, row_number() OVER (PARTITION BY organization_id ORDER BY seq) AS turn "
    "FROM bridge_outbox WHERE not_before <= ?) o "
    "LEFT JOIN interactions i ON i.interaction_id = o.interaction_id "
    "ORDER BY o.turn, o.seq LIMIT ?"
)


def read_entry(row: sqlite3.Row) -> OutboxEntry:
    return OutboxEntry(
        entry_id=str(row["seq"]),
        kind=row["kind"],
        owner=Principal(row["entry_organization_id"], row["entry_user_id"] or None),
        conversation_id=row["entry_conversation_id"],
        enqueued_at=row["enqueued_at"],
        attempts=row["attempts"],
        # Deleting a conversation deletes its interactions in the transaction that writes its delete entry.
        interaction=read_interaction(row) if row["interaction_id"] is not None else None,
    )
