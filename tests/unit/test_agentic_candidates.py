"""``docs_matching`` on every agentic store: the docs a query's required exact terms select (the embedded store's
postings, the OpenSearch node's term filters) are few, hold every match, and a search over them answers as a
scan of every doc does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from memory_plugin.agentic.container_requests import parse_container
from memory_plugin.agentic.models import WORKING
from memory_plugin.agentic.stores import open_agentic_store
from memory_plugin.agentic.stores.backend import AgenticStore
from memory_plugin.agentic.stores.base import MemoryAdd
from memory_plugin.agentic.stores.opensearch_documents import candidate_filters
from memory_plugin.settings import Settings
from tests.unit.test_agentic_postings import ALICE, BOB, assert_searches_answer_as_scans, working

pytestmark = pytest.mark.backends("embedded", "opensearch")


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[AgenticStore]:
    async with open_agentic_store(settings, 8) as store:
        await store.insert_container(ALICE, "c1", parse_container({"name": "c1"}, False).document(8, "alice"))
        for n in range(120):
            owner = BOB if n % 7 == 0 else ALICE
            await store.add_memory(owner, "c1", MemoryAdd(f"w{n:04d}", working(n, owner.user_id or "")))
        yield store


SESSION_S3 = (("namespace.session_id",), ("s3",))
SELECTIVE = [
    ([SESSION_S3], 13),  # 15 of 120, less bob's w0035 and w0091
    ([(("namespace.session_id.keyword", "namespace.session_id"), ("s3",))], 13),
    ([(("session_id",), ("s3", "s5"))], 26),
    ([(("tags.topic",), ("t1",))], 26),
    ([SESSION_S3, (("tags.topic",), ("t3",))], 13),
    ([(("metadata.kind",), ("important",))], 10),
]


async def test_the_store_returns_only_the_docs_the_terms_select(store: AgenticStore, subtests: Any):
    every = await store.docs(ALICE, "c1", WORKING)
    for required, count in SELECTIVE:  # one store for all: the lookups only read it
        with subtests.test(required=required):
            found = await store.docs_matching(ALICE, "c1", WORKING, required)
            selected = [
                doc.id
                for doc in every
                if all(
                    any(value in _strings(doc.source, path) for path in paths for value in values)
                    for paths, values in required
                )
            ]
            assert [doc.id for doc in found] == selected and len(selected) == count


def _strings(source: dict[str, Any], path: str) -> list[str]:
    """The doc's string values at a dotted ``path`` (``x.keyword`` read as ``x``), for the fixture's docs."""
    node: Any = source
    for key in path.removesuffix(".keyword").split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return [node] if isinstance(node, str) else []


async def test_a_search_over_the_candidates_answers_as_a_scan(store: AgenticStore, subtests: Any):
    await assert_searches_answer_as_scans(store, subtests)


def test_the_node_filters_only_by_paths_its_index_holds_exactly():
    session = (("namespace.session_id",), ("s3",))
    assert candidate_filters(WORKING, [session]) == [{"terms": {"namespace.session_id": ["s3"]}}]
    either = (("namespace.session_id.keyword", "namespace.session_id"), ("s3",))
    clauses = [{"terms": {"namespace.session_id.keyword": ["s3"]}}, {"terms": {"namespace.session_id": ["s3"]}}]
    assert candidate_filters(WORKING, [either]) == [{"bool": {"should": clauses}}]
    # a keyword field has no .keyword sub-field; a map's root, an integer, an unindexed or unmapped field
    # (``dynamic`` is false) hold no exact strings: those terms leave every doc a candidate
    for paths in (("session_id.keyword", "session_id"), ("namespace",), ("message_id",), ("binary_data",)):
        assert candidate_filters(WORKING, [(paths, ("s3",))]) == []
    assert candidate_filters(WORKING, [(("strategy_id",), ("x",))]) == []  # long-term's, not working's
    assert candidate_filters(WORKING, [(("session_id",), ("s3",))]) == [{"terms": {"session_id": ["s3"]}}]
