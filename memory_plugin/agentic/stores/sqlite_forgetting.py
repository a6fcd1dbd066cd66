"""Forgetting working memories in the embedded store: the whole cascade of ``sources`` in one transaction.

Sources are found through the ``terms`` table: a long-term doc's ``memory_sources`` terms (with its other
exact terms), and a history entry's ``memory_sources`` and ``history.memory_id`` terms.  An infer job of a
forgotten working memory is deleted in the same transaction, and ``apply_infer`` applies nothing for a job that
is gone: a run whose source is forgotten while its LLM works writes nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_plugin.agentic.models import HISTORY, LONG_TERM, WORKING
from memory_plugin.agentic.stores.base import owner_key
from memory_plugin.agentic.stores.sources import SOURCES, Forgotten, plan, sources_of
from memory_plugin.agentic.stores.sqlite_tables import (
    MEMORY_OWNER,
    batches,
    index_terms,
    next_seq_no,
    remove_memory,
    rewrite,
)
from memory_plugin.auth import Principal

#: The term naming a history entry's long-term memory.
HISTORY_MEMORY_ID = "history.memory_id"


def source_terms(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(SOURCES, str(entry.get("working_memory_id"))) for entry in sources_of(doc)]


def index_history_terms(c: sqlite3.Connection, seq: int, doc: dict[str, Any]) -> None:
    pairs = source_terms(doc)
    if doc.get("memory_id"):
        pairs.append((HISTORY_MEMORY_ID, str(doc["memory_id"])))
    c.executemany("INSERT INTO terms VALUES (?, ?, ?)", [(seq, name, value) for name, value in pairs])


def _cited(
    c: sqlite3.Connection, owner: Principal, container_id: str, memory_type: str, field: str, values: Sequence[str]
) -> dict[str, tuple[int, dict[str, Any]]]:
    """The owner's docs of a type in the container with a ``field`` term among ``values``: id -> (seq, raw doc)."""
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    sql = (
        f"SELECT seq, memory_id, doc FROM memories WHERE {MEMORY_OWNER} AND seq IN "
        "(SELECT seq FROM terms WHERE field = ? AND value IN ({marks}))"
    )
    for part, marks in batches(values):
        rows = c.execute(sql.format(marks=marks), (container_id, memory_type, *owner_key(owner), field, *part))
        for seq, memory_id, doc in rows:
            found[memory_id] = (seq, json.loads(doc))
    return found


def forget(
    c: sqlite3.Connection, owner: Principal, container_id: str, working_ids: Sequence[str]
) -> tuple[Forgotten, list[int]]:
    """The cascade, in the caller's transaction; returns the report and the long-term seqs to unindex."""
    jobs = 0
    for part, marks in batches(working_ids):
        jobs += len(
            c.execute(
                "DELETE FROM infer_jobs WHERE container_id = ? AND organization_id = ? AND user_id = ? "
                f"AND json_extract(request, '$.working_memory_id') IN ({marks}) RETURNING 1",
                (container_id, *owner_key(owner), *part),
            ).fetchall()
        )
    long_term = _cited(c, owner, container_id, LONG_TERM, SOURCES, working_ids)
    history = _cited(c, owner, container_id, HISTORY, SOURCES, working_ids)
    history.update(_cited(c, owner, container_id, HISTORY, HISTORY_MEMORY_ID, list(long_term)))
    decided = plan(
        set(working_ids),
        [(memory_id, doc) for memory_id, (_, doc) in long_term.items()],
        [(history_id, doc) for history_id, (_, doc) in history.items()],
    )
    unindex = []
    for memory_id in decided.delete_long_term:
        remove_memory(c, long_term[memory_id][0], LONG_TERM)
        unindex.append(long_term[memory_id][0])
    for memory_id, doc in decided.rewrite_long_term.items():
        seq, current = long_term[memory_id]
        reembed = doc.get("memory") != current.get("memory")
        rewrite(c, seq, doc, reembed=reembed)
        index_terms(c, seq, doc)
        if reembed:
            unindex.append(seq)
    for history_id in decided.delete_history:
        remove_memory(c, history[history_id][0], HISTORY)
    for history_id, doc in decided.rewrite_history.items():
        rewrite(c, history[history_id][0], doc)
    deleted: list[str] = []
    for part, marks in batches(working_ids):
        rows = c.execute(
            f"DELETE FROM memories WHERE {MEMORY_OWNER} AND memory_id IN ({marks}) RETURNING memory_id",
            (container_id, WORKING, *owner_key(owner), *part),
        ).fetchall()
        deleted += [row[0] for row in rows]
    if deleted or jobs or long_term or history:
        next_seq_no(c)
    return decided.report(deleted, jobs), unindex
