"""The typed agentic models read and write the same JSON the stores keep: a strategy as ``parse_strategy``
stores it, and a long-term memory's document with its keys in ml-commons' order."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import pytest

from embedder import AsyncEmbedder
from memory_plugin.agentic.container_requests import (
    EmbeddingInput,
    parse_container,
    parse_container_update,
    parse_strategy,
    updated_container,
)
from memory_plugin.agentic.infer_run import InferRun
from memory_plugin.agentic.llm import ChatModel, ContainerModels, TextEmbedding
from memory_plugin.agentic.memory_requests import (
    AddMemoriesInput,
    LongTermSearchInput,
    MemoryUpdate,
    parse_add_memories,
    parse_delete_by_query,
    parse_long_term_search,
    parse_memory_update,
)
from memory_plugin.agentic.models import Container, LongTermMemory, Strategy
from memory_plugin.agentic.results import AddMemoriesResult
from memory_plugin.agentic.stores.base import InferJob, StoredDoc
from memory_plugin.agentic.views import added_view
from memory_plugin.auth import Principal
from memory_plugin.errors import InvalidArgument, StatusForbidden, StatusNotFound


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


def test_a_create_body_parses_to_its_typed_input_and_the_stored_document() -> None:
    body = {
        "name": "box",
        "backend_roles": ["team"],
        "configuration": {
            "embedding_model_type": "text_embedding",
            "embedding_model_id": "built-in",
            "embedding_dimension": 384,
            "llm_id": "m",
            "strategies": [{"type": "semantic", "namespace": ["user_id"]}],
        },
    }
    parsed = parse_container(body, retention_enabled=False)
    assert parsed.embedding == EmbeddingInput("TEXT_EMBEDDING", "built-in", 384)
    doc = parsed.document(384, "alice")
    assert list(doc["configuration"]) == [
        "index_prefix",
        "embedding_model_type",
        "embedding_model_id",
        "embedding_dimension",
        "llm_id",
        "max_infer_size",
        "strategies",
        "disable_history",
        "disable_session",
        "use_system_index",
    ]
    assert doc["configuration"]["strategies"][0]["id"].startswith("semantic_")
    assert doc["backend_roles"] == ["team"]


def test_a_wrong_dimension_is_refused_before_a_later_field() -> None:
    """The embedding is checked against its model first, as before the body was parsed at the route."""
    config = {"embedding_model_type": "TEXT_EMBEDDING", "embedding_model_id": "x", "embedding_dimension": 3}
    parsed = parse_container({"name": "b", "configuration": {**config, "max_infer_size": 50}}, False)
    with pytest.raises(InvalidArgument, match="does not match the built-in embedding model"):
        parsed.document(384, "alice")
    with pytest.raises(InvalidArgument, match="Maximum infer size cannot exceed 10"):
        parsed.document(None, "alice")


def test_a_memory_update_parses_for_its_type_and_keeps_a_field_refusal_for_after_the_lookup() -> None:
    update = parse_memory_update("LONG-TERM", {"memory": "x", "tags": {"a": 1}, "summary": "ignored"}, False)
    assert update == MemoryUpdate("long-term", {"memory": "x", "tags": {"a": "1"}}, bumps=True)
    refused = parse_memory_update("long-term", {"memory": "  "}, False)
    assert isinstance(refused.refused, InvalidArgument) and refused.fields == {}
    assert isinstance(parse_memory_update("sessions", {"pinned": True}, False).refused, StatusForbidden)
    with pytest.raises(StatusNotFound, match="Can't update memory history"):
        parse_memory_update("history", {"memory": "x"}, False)


def test_a_delete_by_query_needs_its_query() -> None:
    assert parse_delete_by_query("working", {"query": {"match_all": {}}}).memory_type == "working"
    with pytest.raises(InvalidArgument, match="Query parameter is required"):
        parse_delete_by_query("working", {})


class _CountingModels(ContainerModels):
    """Counts how often a run asks for its models."""

    def __init__(self) -> None:
        super().__init__(cast(AsyncEmbedder, object()), None, None)
        self.asked: list[str] = []

    async def chat(self, owner: Principal, llm_id: Any) -> ChatModel | None:
        self.asked.append(f"chat {llm_id}")
        return None

    async def embedding(self, owner: Principal, config: Mapping[str, Any]) -> TextEmbedding:
        self.asked.append("embedding")
        return cast(TextEmbedding, object())


async def test_an_infer_run_reads_its_job_once_and_resolves_each_model_once() -> None:
    owner, container_owner = Principal("org", "bob"), Principal("org", "alice")
    request = {
        "working_memory_id": "w1",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "namespace": {"user_id": "u", "session_id": "s"},
        "parameters": {"llm_result_path": "$.x"},
    }
    stored = StoredDoc("c1", {"configuration": {"llm_id": "m"}}, owner=container_owner)
    models = _CountingModels()
    run = InferRun.of(InferJob(1, owner, "c1", request), stored, models)
    assert (run.models_owner, run.namespace, run.tags, run.parameters) == (
        container_owner,
        {"user_id": "u", "session_id": "s"},
        {},
        {"llm_result_path": "$.x"},
    )
    assert run.source is not None and run.source["working_memory_id"] == "w1"
    semantic, own_llm = Strategy("a", "SEMANTIC", ("user_id",)), Strategy("b", "SUMMARY", ("user_id",), llm_id="n")
    for strategy in (semantic, semantic, own_llm, own_llm):
        await run.chat(strategy)
        await run.embedding()
    assert models.asked == ["chat m", "embedding", "chat n"]


def test_a_container_update_refuses_its_fields_only_against_the_stored_container_in_their_order() -> None:
    with_strategies = {"configuration": {"strategies": [{"id": "s1", "type": "SEMANTIC", "namespace": ["u"]}]}}
    without = {"configuration": {"strategies": []}}
    assert parse_container_update({"name": 5}, False).refused is not None  # raised once the container is found
    body = {"configuration": {"embedding_model_id": "x", "max_infer_size": 50}}
    update = parse_container_update(body, False)
    with pytest.raises(InvalidArgument, match="Cannot change embedding configuration"):
        updated_container(with_strategies, update, 384)
    with pytest.raises(InvalidArgument, match="Embedding model type is required"):
        updated_container(without, update, 384)
    update = parse_container_update({"name": "n", "backend_roles": [], "configuration": {"llm_id": "m"}}, False)
    doc = updated_container(without, update, 384)
    assert (doc["name"], doc["backend_roles"], doc["configuration"]["max_infer_size"]) == ("n", [], 5)
