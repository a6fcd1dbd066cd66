"""The embedded memory store: conversations and interactions in one SQLite file.

The file's tables, and how their rows read as models, are ``sqlite_tables.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.dates import isoformat
from memory_plugin.dsl import MESSAGE_INDEX, META_INDEX
from memory_plugin.memory.models import Conversation, Interaction, Updated
from memory_plugin.memory.stores.base import (
    MemoryStore,
    OutboxEntry,
    OutboxLag,
    SearchDocument,
    conversation_documents,
    evaluate_search,
    interaction_documents,
)
from memory_plugin.memory.stores.sqlite_tables import (
    CONVERSATIONS,
    INTERACTIONS,
    MIGRATIONS,
    OWNER,
    PENDING_ENTRIES,
    enqueue,
    json_or_none,
    owner_params,
    read_conversation,
    read_entry,
    read_interaction,
    tuple_rows,
)
from memory_plugin.sqlite import Database


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

    async def messages_version(self, conversation_id: str) -> int | None:
        return self.versions.of(conversation_id)

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    async def health(self) -> dict[str, Any]:
        count = await self.db.read(lambda c: c.execute("SELECT count(*) FROM conversations").fetchone()[0])
        return {"status": "green", "conversations": count}

    async def add_conversation(self, conversation: Conversation) -> None:
        organization_id, user_id = owner_params(conversation.owner)

        def row() -> tuple[Any, ...]:  # on the writer's thread: megabytes of additional_info take a while
            return (
                conversation.conversation_id,
                organization_id,
                user_id,
                conversation.name,
                isoformat(conversation.create_time),
                isoformat(conversation.updated_time),
                json_or_none(conversation.additional_info),
                conversation.application_type,
                conversation.version,
            )

        await self.db.write(lambda c: c.execute("INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row()))

    async def get_conversation(self, owner: Principal, conversation_id: str) -> Conversation | None:
        return await self.db.read(lambda c: CONVERSATIONS.owned(c, conversation_id, owner))

    async def list_conversations(
        self, owner: Principal, offset: int, limit: int, by: str = "create_time"
    ) -> list[Conversation]:
        column = {"create_time": "create_time", "updated_time": "updated_time"}[by]
        sql = f"SELECT * FROM conversations WHERE {OWNER} ORDER BY {column} DESC, conversation_id DESC LIMIT ? OFFSET ?"
        params = (*owner_params(owner), limit, offset)
        return await self.db.read(lambda c: [read_conversation(row) for row in c.execute(sql, params)])

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
                enqueue(c, "delete", owner, conversation_id)
            return ids

        return await self.db.write(delete, settled=lambda: self.versions.bump(conversation_id))

    async def erase_user(self, owner: Principal) -> tuple[int, int]:
        def erase(c: sqlite3.Connection) -> tuple[int, int]:
            messages = c.execute(f"DELETE FROM interactions WHERE {OWNER}", owner_params(owner)).rowcount
            memories = c.execute(f"DELETE FROM conversations WHERE {OWNER}", owner_params(owner)).rowcount
            return memories, messages

        return await self.db.write(erase, settled=self.versions.bump_all)

    async def add_interaction(self, interaction: Interaction) -> bool:
        organization_id, user_id = owner_params(interaction.owner)
        created = isoformat(interaction.create_time)

        def row() -> tuple[Any, ...]:  # on the writer's thread, as in add_conversation
            return (
                interaction.interaction_id,
                interaction.conversation_id,
                organization_id,
                user_id,
                created,
                interaction.input,
                interaction.response,
                interaction.prompt_template,
                interaction.origin,
                json_or_none(interaction.additional_info),
                interaction.parent_interaction_id,
                interaction.trace_number,
                interaction.version,
            )

        def add(c: sqlite3.Connection) -> bool:
            touched = c.execute(
                "UPDATE conversations SET updated_time = max(updated_time, ?), version = version + 1 "
                f"WHERE conversation_id = ? AND {OWNER}",
                (created, interaction.conversation_id, organization_id, user_id),
            ).rowcount
            if not touched:
                return False
            c.execute("INSERT INTO interactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row())
            if self.outbox:
                enqueue(c, "index", interaction.owner, interaction.conversation_id, interaction.interaction_id)
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
            f"(SELECT conversation_id FROM conversations WHERE conversation_id = ? AND {OWNER}) "
            f"ORDER BY create_time {direction}, interaction_id {direction} LIMIT ? OFFSET ?"
        )
        params = (conversation_id, *owner_params(owner), limit, offset)

        def read(c: sqlite3.Connection) -> list[Interaction] | None:
            # One statement checks the owner and reads the page; only an empty page needs to ask which it was.
            page = [read_interaction(row) for row in tuple_rows(c, sql, params)]
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
                f"SELECT * FROM interactions WHERE parent_interaction_id = ? AND {OWNER} "
                "ORDER BY trace_number ASC, create_time ASC, interaction_id ASC LIMIT ? OFFSET ?",
                (interaction_id, *owner_params(owner), limit, offset),
            )
            return [read_interaction(row) for row in rows]

        return await self.db.read(read)

    async def update_interaction(
        self, owner: Principal, interaction_id: str, changes: Mapping[str, Any]
    ) -> Updated[Interaction] | None:
        def update(c: sqlite3.Connection) -> Updated[Interaction] | None:
            def reindex(before: Interaction, after: Interaction) -> None:
                if self.outbox and after.response != before.response:  # the record holds input and response
                    enqueue(c, "index", owner, after.conversation_id, interaction_id)

            updated = INTERACTIONS.update(c, interaction_id, owner, changes, reindex)
            if updated is not None:
                touched.append(updated.document.conversation_id)
            return updated

        touched: list[str] = []  # known inside the transaction only
        return await self.db.write(update, settled=lambda: self.versions.bump(*touched))

    async def outbox_pending(self, limit: int, now: float) -> list[OutboxEntry]:
        return await self.db.read(lambda c: [read_entry(row) for row in c.execute(PENDING_ENTRIES, (now, limit))])

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
            sql = f"SELECT * FROM conversations WHERE {OWNER}"
            rows = await self.db.read(lambda c: [read_conversation(row) for row in c.execute(sql, owner_params(owner))])
            return conversation_documents(rows)  # rowid (insertion) order: ties keep it

        return await evaluate_search(body, META_INDEX, documents)

    async def search_interactions(
        self, owner: Principal, conversation_id: str, body: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        async def documents() -> list[SearchDocument]:
            sql = f"SELECT * FROM interactions WHERE {OWNER} AND conversation_id = ?"
            params = (*owner_params(owner), conversation_id)
            return interaction_documents(
                await self.db.read(lambda c: [read_interaction(row) for row in c.execute(sql, params)])
            )

        return await evaluate_search(body, MESSAGE_INDEX, documents, memory_id=conversation_id)
