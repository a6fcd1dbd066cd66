"""The embedded agentic store's term-filter plan (rarest list first, then read or probe) against a brute-force answer."""

from __future__ import annotations

import random
import sqlite3

import numpy as np
import pytest

from memory_plugin.agentic.stores import sqlite_tables
from memory_plugin.agentic.stores.base import LongTermScope
from memory_plugin.auth import Principal

FIELDS = {"namespace.user_id": 40, "namespace.agent_id": 3, "tags.topic": 7, "namespace_size": 1}


@pytest.fixture(scope="module")
def terms() -> tuple[sqlite3.Connection, dict[int, set[tuple[str, str]]]]:
    connection = sqlite3.connect(":memory:")
    connection.executescript(
        "CREATE TABLE terms (seq INTEGER NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL);"
        "CREATE INDEX terms_lookup ON terms (field, value, seq);"
    )
    chosen = random.Random(7)
    docs = {
        seq: {(field, f"v{chosen.randrange(values)}") for field, values in FIELDS.items() if chosen.random() < 0.9}
        for seq in range(1, 3001)
    }
    connection.executemany(
        "INSERT INTO terms VALUES (?, ?, ?)", [(s, f, v) for s, pairs in docs.items() for f, v in pairs]
    )
    return connection, docs


def brute_force(docs: dict[int, set[tuple[str, str]]], wanted: list[tuple[str, str]]) -> list[int]:
    return sorted(seq for seq, pairs in docs.items() if set(wanted) <= pairs)


def test_every_plan_gives_the_brute_force_answer(terms) -> None:  # type: ignore[no-untyped-def]
    connection, docs = terms
    chosen = random.Random(11)
    for _ in range(300):
        count = chosen.randint(1, 4)
        wanted = [(field, f"v{chosen.randrange(FIELDS[field] + 1)}") for field in chosen.sample(list(FIELDS), count)]
        wanted += chosen.sample(wanted, chosen.randint(0, 1))  # a repeated term changes nothing
        scope = LongTermScope(Principal("org", "user"), "container", terms=wanted)
        found = sqlite_tables.candidates(connection, scope)
        assert found is not None and found.dtype == np.int64
        assert found.tolist() == brute_force(docs, wanted), wanted


def test_both_ways_of_narrowing_are_taken(terms, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A rare term then a common one is probed (few candidates, many matches); two common ones are read and intersected."""
    connection, docs = terms
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        rare_then_common = [("namespace.user_id", "v1"), ("namespace_size", "v0")]
        found = sqlite_tables.candidates(connection, LongTermScope(Principal("o", "u"), "c", terms=rare_then_common))
        assert found is not None and found.tolist() == brute_force(docs, rare_then_common)
        assert any("json_each" in sql for sql in statements)
        statements.clear()
        common = [("namespace.agent_id", "v1"), ("namespace_size", "v0")]
        found = sqlite_tables.candidates(connection, LongTermScope(Principal("o", "u"), "c", terms=common))
        assert found is not None and found.tolist() == brute_force(docs, common)
        assert not any("json_each" in sql for sql in statements)
    finally:
        connection.set_trace_callback(None)


def test_a_term_that_matches_nothing_reads_no_list(terms) -> None:  # type: ignore[no-untyped-def]
    connection, _ = terms
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        wanted = [("namespace_size", "v0"), ("namespace.user_id", "absent")]
        found = sqlite_tables.candidates(connection, LongTermScope(Principal("o", "u"), "c", terms=wanted))
    finally:
        connection.set_trace_callback(None)
    assert found is not None and found.tolist() == []
    assert all("count(*)" in sql for sql in statements)
