"""The typed agentic models read and write the same JSON the stores keep: a strategy as ``parse_strategy``
stores it, and a long-term memory's document with its keys in ml-commons' order."""

from __future__ import annotations

import json

from memory_plugin.agentic.container_requests import parse_strategy
from memory_plugin.agentic.memory_requests import (
    AddMemoriesInput,
    LongTermSearchInput,
    parse_add_memories,
    parse_long_term_search,
)
from memory_plugin.agentic.models import Container, LongTermMemory, Strategy
from memory_plugin.agentic.results import AddMemoriesResult
from memory_plugin.agentic.views import added_view


def test_strategy_from_its_stored_source() -> None:
    stored = {
        "id": "semantic_1",
        **parse_strategy(
            {"type": "semantic", "namespace": ["user_id"], "configuration": {"llm_id": "m1", "system_prompt": "p"}}
        ),
    }
    strategy = Container("c1", {"configuration": {"strategies": [stored]}}).strategies[0]
    assert strategy == Strategy("semantic_1", "SEMANTIC", ("user_id",), True, "m1", None, "p")


def test_a_strategy_fires_only_enabled_and_with_all_its_keys() -> None:
    strategy = Strategy("s", "SEMANTIC", ("user_id", "agent_id"))
    assert strategy.scope({"user_id": "u", "agent_id": "a", "session_id": "x"}) == {"user_id": "u", "agent_id": "a"}
    assert strategy.scope({"user_id": "u"}) is None
    assert Strategy("s", "SEMANTIC", ("user_id",), enabled=False).scope({"user_id": "u"}) is None


def test_long_term_memory_source_keeps_the_stored_key_order() -> None:
    strategy = Strategy("s", "USER_PREFERENCE", ("user_id",))
    memory = LongTermMemory("likes tea", strategy, {"user_id": "u"}, "alice", "c1", created_time=7, tags={"t": "1"})
    assert json.dumps(memory.to_source()) == json.dumps(
        {
            "memory": "likes tea",
            "strategy_type": "USER_PREFERENCE",
            "strategy_id": "s",
            "namespace": {"user_id": "u"},
            "namespace_size": 1,
            "tags": {"t": "1"},
            "owner_id": "alice",
            "memory_container_id": "c1",
            "created_time": 7,
            "last_updated_time": 7,
        }
    )
    assert "tags" not in LongTermMemory("x", strategy, {"user_id": "u"}, "", "c1", created_time=7).to_source()


def test_an_add_body_parses_to_its_typed_input() -> None:
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "payload_type": "DATA",
        "infer": "true",
        "namespace": {"user_id": "u", "session_id": "s", "n": None},
        "metadata": {},
        "tags": {"n": 3, "b": True},
        "parameters": {},
        "message_id": 2.0,
        "ignored": 1,
    }
    parsed = parse_add_memories(body)
    assert parsed == AddMemoriesInput(
        "data",
        body["messages"],
        True,
        namespace={"user_id": "u", "session_id": "s"},
        tags={"n": "3", "b": "true"},
        message_id=2,
    )
    assert parsed.session_id == "s" and parse_add_memories({}).session_id is None


def test_an_add_result_renders_as_ml_commons_answers() -> None:
    assert json.dumps(added_view(AddMemoriesResult("w1", "s1"))) == '{"session_id": "s1", "working_memory_id": "w1"}'
    assert added_view(AddMemoriesResult("w1")) == {"working_memory_id": "w1"}


def test_a_long_term_search_body_parses_to_its_typed_input() -> None:
    body = {"query": "bees", "k": 3, "namespace": {"user_id": "u"}, "tags": {"t": 1}, "min_score": 0.5}
    parsed = parse_long_term_search(body)
    assert parsed == LongTermSearchInput("bees", 3, (("namespace.user_id", "u"), ("tags.t", "1")), 0.5)
    assert parse_long_term_search({"query": "q", "filter": {"match_all": {}}}).filter is not None
    hybrid = parse_long_term_search({"query": "q", "bm25_weight": 0.3, "neural_weight": 0.7}, hybrid=True)
    assert (hybrid.bm25_weight, hybrid.neural_weight) == (0.3, 0.7)
    assert parse_long_term_search({"query": "q", "bm25_weight": 0.3}).bm25_weight == 0.5  # semantic has none
