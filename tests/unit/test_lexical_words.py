"""A query's words for the histories' keyword search: what both stores match on."""

from __future__ import annotations

from memory_plugin.histories.stores.lexical import MAX_WORDS, query_words
from memory_plugin.histories.stores.opensearch_words import match_query


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
