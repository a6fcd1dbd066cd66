"""``GET …/memories/{long-term,history}/{id}?sources=true`` (ours, for the console): the working memories a fact
and its history entries came from, with the text each run left; hidden from every other answer."""

from __future__ import annotations

import pytest

from tests.http.test_agentic import SEMANTIC_CONFIG, call, container, long_term
from tests.http.test_agentic_forgetting import add, update_first

pytestmark = [pytest.mark.model, pytest.mark.backends("embedded", "opensearch")]


async def test_sources_name_the_working_memories_a_fact_came_from(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    first = await add(api, alice, cid, llm, ["Bob drinks green tea"])
    llm.decide = update_first("Bob drinks green tea with honey")
    second = await add(api, alice, cid, llm, ["Bob likes honey"], session_id="s1")
    [fact] = await long_term(api, alice, cid)
    plain = await call(api, alice, "GET", f"/{cid}/memories/long-term/{fact['_id']}")
    assert "memory_sources" not in plain

    shown = await call(api, alice, "GET", f"/{cid}/memories/long-term/{fact['_id']}", params={"sources": "true"})
    assert {key: value for key, value in shown.items() if key != "memory_sources"} == plain
    assert shown["memory_sources"] == [
        {"working_memory_id": first, "session_id": "s0", "memory": "Bob drinks green tea"},
        {"working_memory_id": second, "session_id": "s1", "memory": "Bob drinks green tea with honey"},
    ]
    updates = await call(
        api, alice, "POST", f"/{cid}/memories/history/_search", {"query": {"term": {"action": "UPDATE"}}}
    )
    [update] = updates["hits"]["hits"]
    entry = await call(api, alice, "GET", f"/{cid}/memories/history/{update['_id']}", params={"sources": "true"})
    assert entry["memory_sources"] == [{"working_memory_id": second, "session_id": "s1"}]


async def test_sources_are_for_long_term_and_history_only(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    working = await add(api, alice, cid, llm, ["Bob keeps bees"])
    refused = await call(
        api, alice, "GET", f"/{cid}/memories/working/{working}", params={"sources": "true"}, status=400
    )
    assert "[sources] is for long-term and history memory, not working" in refused["error"]["reason"]
    unknown = await call(api, alice, "GET", f"/{cid}/memories/working/{working}", params={"source": "1"}, status=400)
    assert "source" in unknown["error"]["reason"]
    await call(api, alice, "GET", f"/{cid}/memories/long-term/nope", params={"sources": "true"}, status=404)
