"""The OpenSearch store's keyword side: each chunk's ``words``, kept as the embedded store keeps them.

A chunk's words are its text and the last chunk of the record before it in the same user's timeline
(``lexical``, the embedded store's module, says why). OpenSearch has no transaction to keep the
links in, so the store keeps them in two steps: the words are computed when a record is written
(its predecessor found by a search, its successor re-pointed to it), and a delete re-points the
records that borrowed from what it deleted (``context_record_id`` names the lender).

``words`` is analysed by OpenSearch's built-in ``english`` analyzer (standard tokenizer, lower case,
English stop words, Porter stemming), the nearest to the embedded store's Porter over unicode61;
built in, so an index made before it existed takes the field without being closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_plugin.histories.stores.lexical import query_words

WORDS_FIELDS: dict[str, Any] = {
    "words": {"type": "text", "analyzer": "english"},
    "context_record_id": {"type": "keyword", "ignore_above": 8191},
}


@dataclass(frozen=True)
class Place:
    """Where a record sits in its user's timeline."""

    organization_id: str
    user_id: str
    created_us: int
    record_id: str

    @property
    def key(self) -> tuple[int, str]:
        return (self.created_us, self.record_id)


@dataclass(frozen=True)
class Lender:
    """The record a chunk's words borrow from, and the text they borrow (its last chunk)."""

    record_id: str
    created_us: int
    text: str

    @property
    def key(self) -> tuple[int, str]:
        return (self.created_us, self.record_id)


def words(text: str, lender: Lender | None) -> str:
    return text if lender is None else f"{text}\n{lender.text}"


def neighbour_search(place: Place, *, before: bool, excluding: Sequence[str]) -> dict[str, Any]:
    """A search body for the record just before (or after) ``place``, ``excluding`` some record ids:
    its last chunk (before) or first chunk (after), by ``(record_created_at, record_id)``."""
    compare, order = ("lt", "desc") if before else ("gt", "asc")
    timeline = [
        {"range": {"record_created_at_us": {compare: place.created_us}}},
        {
            "bool": {
                "filter": [
                    {"term": {"record_created_at_us": place.created_us}},
                    {"range": {"record_id": {compare: place.record_id}}},
                ]
            }
        },
    ]
    return {
        "size": 1,
        "_source": ["record_id", "record_created_at_us", "text"],
        "query": {
            "bool": {
                "filter": [
                    {"term": {"organization_id": place.organization_id}},
                    {"term": {"user_id": place.user_id}},
                    {"bool": {"should": timeline, "minimum_should_match": 1}},
                ],
                "must_not": [{"terms": {"record_id": list(excluding)}}] if excluding else [],
            }
        },
        "sort": [{"record_created_at_us": order}, {"record_id": order}, {"chunk_index": order}],
    }


def lender_of(response: dict[str, Any]) -> Lender | None:
    hits = response.get("hits", {}).get("hits", [])
    if not hits:
        return None
    source = hits[0]["_source"]
    return Lender(source["record_id"], int(source["record_created_at_us"]), source["text"])


def match_query(text: str) -> dict[str, Any] | None:
    """Free text as a ``match`` on ``words`` (any word may match); ``None`` when it has no word."""
    tokens = query_words(text)  # the embedded store's words: each counts once
    if not tokens:
        return None
    return {"match": {"words": {"query": " ".join(tokens), "operator": "or"}}}
