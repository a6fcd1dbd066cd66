"""The SQL of the SQLite store's writes (``SqliteHistoryStore``): records and chunks inserted, records deleted, and
what each write hands the in-memory indexes once it commits.

Split from ``sqlite`` (the store) so that each stays readable; these run in the write's transaction, on the
database thread.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memory_plugin.dates import to_micros
from memory_plugin.histories.stores import lexical
from memory_plugin.histories.stores.base import unit_vector
from memory_plugin.histories.stores.filter_columns import Row
from memory_plugin.histories.stores.records import Chunk, Record
from memory_plugin.histories.stores.sqlite_tables import column_row

#: ``(record_type, chunk ids, vectors, organization ids, column rows, metadata)`` per added group.
Added = tuple[str, list[int], list[np.ndarray], list[str], list[Row], list[Mapping[str, Any]]]


def insert_records(
    connection: sqlite3.Connection, items: Sequence[tuple[Record, Sequence[Chunk]]], dimension: int
) -> tuple[list[tuple[str, int]], list[Added], lexical.Changed, list[str]]:
    """Write ``items`` (each replacing the record of its id); return the chunks removed, the groups added, the
    words changed and the records following the written ones (``HistoryStore.write_records``)."""
    # On the database thread: normalising thousands of vectors stays off the event loop.
    prepared = [
        (record, [(chunk, unit_vector(chunk.vector, dimension)) for chunk in chunks]) for record, chunks in items
    ]
    removed: list[tuple[str, int]] = []
    added: dict[str, Added] = {}
    changed: lexical.Changed = {}
    for record, chunks in prepared:
        removed += delete_where(
            connection,
            "r.organization_id = ? AND r.record_id = ?",
            [record.organization_id, record.record_id],
            changed,
        )
        rid = connection.execute(
            "INSERT INTO records (organization_id, record_id, record_type, region, record_created_at,"
            " ingested_at, user_id, document_id, retention, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.organization_id,
                record.record_id,
                record.record_type,
                record.region,
                to_micros(record.record_created_at),
                to_micros(record.ingested_at),
                record.user_id,
                record.document_id,
                record.retention,
                json.dumps(dict(record.metadata)),
            ),
        ).lastrowid
        group = added.setdefault(record.record_type, (record.record_type, [], [], [], [], []))
        row = column_row(record)
        for chunk, vector in chunks:
            chunk_row = connection.execute(
                "INSERT INTO chunks (rid, chunk_index, chunk_total, text, vector) VALUES (?, ?, ?, ?, ?)",
                (rid, chunk.index, chunk.total, chunk.text, vector.tobytes()),
            ).lastrowid
            group[1].append(int(chunk_row))  # type: ignore[arg-type]
            group[2].append(vector)
            group[3].append(record.organization_id)
            group[4].append(row)
            group[5].append(record.metadata)
        lexical.add_words(connection, int(rid), changed)  # type: ignore[arg-type]
    by_org: dict[str, list[str]] = {}
    for record, _ in items:
        by_org.setdefault(record.organization_id, []).append(record.record_id)
    after = [found for org, ids in by_org.items() for found in lexical.following(connection, org, ids)]
    return removed, list(added.values()), changed, after


def delete_where(
    connection: sqlite3.Connection, where: str, params: list[Any], changed: lexical.Changed
) -> list[tuple[str, int]]:
    """Delete the matching records (chunks and their words cascade); return their ``(record_type, chunk_id)``s.

    The records whose words borrowed from a deleted one are reindexed in the same transaction; ``changed``
    gets both.
    """
    cursor = connection.cursor()
    cursor.row_factory = None
    removed = cursor.execute(
        f"SELECT r.record_type, c.id FROM records r JOIN chunks c ON c.rid = r.rid WHERE {where}", params
    ).fetchall()
    borrowing = lexical.successors(connection, where, params)
    cursor.execute(f"DELETE FROM records WHERE rid IN (SELECT r.rid FROM records r WHERE {where})", params)
    changed.update((chunk, None) for _, chunk in removed)
    lexical.reindex(connection, borrowing, changed)
    return removed
