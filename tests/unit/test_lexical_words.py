"""A query's words for the histories' keyword search: what both stores match on."""

from __future__ import annotations

import sqlite3

from memory_plugin.histories.stores import lexical
from memory_plugin.histories.stores.lexical import MAX_WORDS, query_words
from memory_plugin.histories.stores.opensearch_words import match_query
from memory_plugin.histories.stores.sqlite_tables import MIGRATIONS


def test_words_are_distinct_lower_cased_alphanumeric_runs_in_order() -> None:
    assert query_words("Did Caroline's dog—Rex—bark at rex? 3.5km!") == [
        "did",
        "caroline",
        "s",
        "dog",
        "rex",
        "bark",
        "at",
        "3",
        "5km",
    ]
    assert query_words(" ?! … ") == []


def test_a_long_query_keeps_its_first_words_only() -> None:
    text = " ".join(f"w{n}" for n in range(MAX_WORDS * 3))
    assert query_words(text) == [f"w{n}" for n in range(MAX_WORDS)]


def test_opensearch_matches_the_same_words_once_each() -> None:
    assert match_query("Rex rex REX barked") == {"match": {"words": {"query": "rex barked", "operator": "or"}}}
    assert match_query("---") is None


def test_a_records_timeline_neighbours_are_found_by_seeks_from_the_wanted_ids() -> None:
    """The wanted record ids drive the lookup: with ``record_id IN (...)`` SQLite's planner scanned the
    organisation's whole timeline index for them (about a second a hybrid search at a million records)."""
    connection = sqlite3.connect(":memory:")
    for migrate in MIGRATIONS:
        migrate(connection)
    plan = [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + lexical._AROUND, ('["r1"]', "org"))]
    assert plan[0].startswith("SCAN json_each"), plan
    assert any("(organization_id=? AND record_id=?)" in step for step in plan), plan
    assert not any(step.startswith("SCAN r") for step in plan), plan
