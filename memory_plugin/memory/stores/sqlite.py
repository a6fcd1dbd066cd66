"""The embedded memory store: conversations and interactions in one SQLite file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.dates import isoformat, parse_instant
from memory_plugin.memory.dsl import DocumentResults, SearchBody
from memory_plugin.memory.models import Conversation, Interaction
from memory_plugin.memory.stores.base import MemoryStore, evaluate_conversations, evaluate_interactions
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


MIGRATIONS = [_schema_v1]

_OWNER = "organization_id = ? AND user_id = ?"


def _owner_params(owner: Principal) -> tuple[str, str]:
    return owner.organization_id, owner.user_id or ""


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(
        conversation_id=row["conversation_id"],
        owner=Principal(row["organization_id"], row["user_id"] or None),
        name=row["name"],
        create_time=parse_instant(row["create_time"]),
        updated_time=parse_instant(row["updated_time"]),
        additional_info=json.loads(row["additional_info"]) if row["additional_info"] else None,
    )


def _interaction(row: sqlite3.Row) -> Interaction:
    return Interaction(
        interaction_id=row["interaction_id"],
        conversation_id=row["conversation_id"],
        owner=Principal(row["organization_id"], row["user_id"] or None),
        create_time=parse_instant(row["create_time"]),
        input=row["input"],
        response=row["response"],
        prompt_template=row["prompt_template"],
        origin=row["origin"],
        additional_info=json.loads(row["additional_info"]) if row["additional_info"] is not None else None,
        parent_interaction_id=row["parent_interaction_id"],
        trace_number=row["trace_number"],
    )


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


class SqliteMemoryStore(MemoryStore):
    def __init__(self, path: Path) -> None:
        self.db = Database(path, MIGRATIONS)

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    async def health(self) -> dict[str, Any]:
        count = await self.db.run(lambda c: c.execute("SELECT count(*) FROM conversations").fetchone()[0])
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
        )
        await self.db.write(lambda c: c.execute("INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?, ?)", row))

    async def get_conversation(self, owner: Principal, conversation_id: str) -> Conversation | None:
        def read(c: sqlite3.Connection) -> Conversation | None:
            row = c.execute(
                f"SELECT * FROM conversations WHERE conversation_id = ? AND {_OWNER}",
                (conversation_id, *_owner_params(owner)),
            ).fetchone()
            return _conversation(row) if row else None

        return await self.db.run(read)

    async def list_conversations(
        self, owner: Principal, offset: int, limit: int, by: str = "create_time"
    ) -> list[Conversation]:
        column = {"create_time": "create_time", "updated_time": "updated_time"}[by]
        sql = (
            f"SELECT * FROM conversations WHERE {_OWNER} ORDER BY {column} DESC, conversation_id DESC LIMIT ? OFFSET ?"
        )
        params = (*_owner_params(owner), limit, offset)
        return await self.db.run(lambda c: [_conversation(row) for row in c.execute(sql, params)])

    async def update_conversation(
        self, owner: Principal, conversation_id: str, changes: Mapping[str, Any]
    ) -> Conversation | None:
        columns = {
            name: value for name, value in changes.items() if name in {"name", "additional_info", "updated_time"}
        }

        def update(c: sqlite3.Connection) -> Conversation | None:
            assignments = ", ".join(f"{name} = ?" for name in columns)
            values = [_column_value(name, value) for name, value in columns.items()]
            c.execute(
                f"UPDATE conversations SET {assignments} WHERE conversation_id = ? AND {_OWNER}",
                (*values, conversation_id, *_owner_params(owner)),
            )
            row = c.execute(
                f"SELECT * FROM conversations WHERE conversation_id = ? AND {_OWNER}",
                (conversation_id, *_owner_params(owner)),
            ).fetchone()
            return _conversation(row) if row else None

        return await self.db.write(update)

    async def delete_conversation(self, owner: Principal, conversation_id: str) -> list[str] | None:
        def delete(c: sqlite3.Connection) -> list[str] | None:
            found = c.execute(
                f"SELECT 1 FROM conversations WHERE conversation_id = ? AND {_OWNER}",
                (conversation_id, *_owner_params(owner)),
            ).fetchone()
            if not found:
                return None
            ids = [
                row[0]
                for row in c.execute(
                    "SELECT interaction_id FROM interactions WHERE conversation_id = ?", (conversation_id,)
                )
            ]
            c.execute("DELETE FROM interactions WHERE conversation_id = ?", (conversation_id,))
            c.execute("DELETE FROM conversations WHERE conversation_id = ?", (conversation_id,))
            return ids

        return await self.db.write(delete)

    async def erase_user(self, owner: Principal) -> tuple[int, int]:
        def erase(c: sqlite3.Connection) -> tuple[int, int]:
            messages = c.execute(f"DELETE FROM interactions WHERE {_OWNER}", _owner_params(owner)).rowcount
            memories = c.execute(f"DELETE FROM conversations WHERE {_OWNER}", _owner_params(owner)).rowcount
            return memories, messages

        return await self.db.write(erase)

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
        )

        def add(c: sqlite3.Connection) -> bool:
            touched = c.execute(
                f"UPDATE conversations SET updated_time = max(updated_time, ?) WHERE conversation_id = ? AND {_OWNER}",
                (created, interaction.conversation_id, organization_id, user_id),
            ).rowcount
            if not touched:
                return False
            c.execute("INSERT INTO interactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            return True

        return await self.db.write(add)

    async def get_interaction(self, owner: Principal, interaction_id: str) -> Interaction | None:
        def read(c: sqlite3.Connection) -> Interaction | None:
            row = c.execute(
                f"SELECT * FROM interactions WHERE interaction_id = ? AND {_OWNER}",
                (interaction_id, *_owner_params(owner)),
            ).fetchone()
            return _interaction(row) if row else None

        return await self.db.run(read)

    async def list_interactions(
        self, owner: Principal, conversation_id: str, offset: int, limit: int, newest_first: bool
    ) -> list[Interaction] | None:
        direction = "DESC" if newest_first else "ASC"

        def read(c: sqlite3.Connection) -> list[Interaction] | None:
            if not c.execute(
                f"SELECT 1 FROM conversations WHERE conversation_id = ? AND {_OWNER}",
                (conversation_id, *_owner_params(owner)),
            ).fetchone():
                return None
            rows = c.execute(
                "SELECT * FROM interactions WHERE conversation_id = ? AND trace_number IS NULL "
                f"ORDER BY create_time {direction}, interaction_id {direction} LIMIT ? OFFSET ?",
                (conversation_id, limit, offset),
            )
            return [_interaction(row) for row in rows]

        return await self.db.run(read)

    async def list_traces(
        self, owner: Principal, interaction_id: str, offset: int, limit: int
    ) -> list[Interaction] | None:
        def read(c: sqlite3.Connection) -> list[Interaction] | None:
            if not c.execute(
                f"SELECT 1 FROM interactions WHERE interaction_id = ? AND {_OWNER}",
                (interaction_id, *_owner_params(owner)),
            ).fetchone():
                return None
            rows = c.execute(
                "SELECT * FROM interactions WHERE parent_interaction_id = ? "
                "ORDER BY trace_number ASC, create_time ASC, interaction_id ASC LIMIT ? OFFSET ?",
                (interaction_id, limit, offset),
            )
            return [_interaction(row) for row in rows]

        return await self.db.run(read)

    async def update_interaction(
        self, owner: Principal, interaction_id: str, changes: Mapping[str, Any]
    ) -> Interaction | None:
        columns = {name: value for name, value in changes.items() if name in {"response", "additional_info"}}

        def update(c: sqlite3.Connection) -> Interaction | None:
            if columns:
                assignments = ", ".join(f"{name} = ?" for name in columns)
                values = [_column_value(name, value) for name, value in columns.items()]
                c.execute(
                    f"UPDATE interactions SET {assignments} WHERE interaction_id = ? AND {_OWNER}",
                    (*values, interaction_id, *_owner_params(owner)),
                )
            row = c.execute(
                f"SELECT * FROM interactions WHERE interaction_id = ? AND {_OWNER}",
                (interaction_id, *_owner_params(owner)),
            ).fetchone()
            return _interaction(row) if row else None

        return await self.db.write(update)

    async def search_conversations(self, owner: Principal, query: SearchBody) -> DocumentResults:
        return await evaluate_conversations(query, await self.all_conversations(owner))

    async def search_interactions(self, owner: Principal, conversation_id: str, query: SearchBody) -> DocumentResults:
        return await evaluate_interactions(query, await self.all_interactions(owner, conversation_id))

    async def all_conversations(self, owner: Principal) -> list[Conversation]:
        sql = f"SELECT * FROM conversations WHERE {_OWNER}"
        return await self.db.run(lambda c: [_conversation(row) for row in c.execute(sql, _owner_params(owner))])

    async def all_interactions(self, owner: Principal, conversation_id: str | None = None) -> list[Interaction]:
        sql = f"SELECT * FROM interactions WHERE {_OWNER}"
        params: tuple[Any, ...] = _owner_params(owner)
        if conversation_id is not None:
            sql += " AND conversation_id = ?"
            params = (*params, conversation_id)
        return await self.db.run(lambda c: [_interaction(row) for row in c.execute(sql, params)])


def _column_value(name: str, value: Any) -> Any:
    if name == "additional_info":
        return _json_or_none(value)
    if name == "updated_time":
        return isoformat(value)
    return value
