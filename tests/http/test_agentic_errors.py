"""Every 400/403/404/409 of AGENTIC.md, in ml-commons' words, and who may see what: another principal's
container, session or memory is a 404 on every path, and no search or delete by query reaches it."""

from __future__ import annotations

import pytest

from memory_plugin.agentic.models import BASE
from memory_plugin.app import create_app
from tests.http.test_agentic import SEMANTIC_CONFIG, call, container, conversation, error, seed_long_term, settle

#: Container embedding dimensions are checked against the real model (384), and ranking is the point.
pytestmark = [pytest.mark.model, pytest.mark.backends("embedded", "opensearch")]

CREATE_ERRORS = [
    (None, 400, "Request body is required"),
    ({"description": "x"}, 400, "name is null"),
    ({"name": 5}, 400, "[name] must be a string"),
    (
        {
            "name": "a",
            "configuration": {"embedding_model_type": "dense", "embedding_model_id": "m", "embedding_dimension": 384},
        },
        400,
        "Wrong function name",
    ),
    (
        {"name": "a", "configuration": {"embedding_model_type": "TEXT_EMBEDDING"}},
        400,
        "Embedding model ID is required when embedding model type is provided",
    ),
    (
        {"name": "a", "configuration": {"embedding_model_id": "m"}},
        400,
        "Embedding model type is required when embedding model ID is provided",
    ),
    (
        {"name": "a", "configuration": {"embedding_model_type": "TEXT_EMBEDDING", "embedding_model_id": "m"}},
        400,
        "Dimension is required for TEXT_EMBEDDING",
    ),
    (
        {
            "name": "a",
            "configuration": {
                "embedding_model_type": "TEXT_EMBEDDING",
                "embedding_model_id": "m",
                "embedding_dimension": 1024,
            },
        },
        400,
        "embedding_dimension 1024 does not match the built-in embedding model, which has 384 dimensions",
    ),
    (
        {
            "name": "a",
            "configuration": {
                "embedding_model_type": "SPARSE_ENCODING",
                "embedding_model_id": "m",
                "embedding_dimension": 384,
            },
        },
        400,
        "Dimension is not allowed for SPARSE_ENCODING",
    ),
    ({"name": "a", "configuration": {"llm_id": "x", "max_infer_size": 11}}, 400, "Maximum infer size cannot exceed 10"),
    ({"name": "a", "configuration": {"index_prefix": "Bad Prefix"}}, 400, "Invalid index_prefix [Bad Prefix]"),
    (
        {"name": "a", "backend_roles": ["ok", "not ok!"]},
        400,
        "Backend role contains invalid characters. Only alphanumeric characters and :+=,.@-_/ are allowed: not ok!",
    ),
    ({"name": "a", "backend_roles": ["ok", "\u00a0"]}, 400, "Backend role contains invalid characters."),
    ({"name": "a", "backend_roles": [" "]}, 400, "Backend role cannot be empty or blank"),
    ({"name": "a", "backend_roles": [""]}, 400, "Backend role cannot be empty or blank"),
    (
        {"name": "a", "backend_roles": ["r" * 129]},
        400,
        f"Backend role exceeds maximum length of 128 characters: {'r' * 129}",
    ),
    (
        {"name": "a", "configuration": {"strategies": [{"type": "SEMANTIC", "namespace": ["user_id"]}]}},
        400,
        "Strategies require both an LLM model and embedding model",
    ),
    (
        {
            "name": "a",
            "configuration": {**SEMANTIC_CONFIG, "strategies": [{"type": "summarization", "namespace": ["u"]}]},
        },
        400,
        "Invalid memory type: summarization. Must be SEMANTIC, USER_PREFERENCE, or SUMMARY",
    ),
    (
        {"name": "a", "configuration": {**SEMANTIC_CONFIG, "strategies": [{"type": "SUMMARY", "namespace": []}]}},
        400,
        "Strategy namespace is required.",
    ),
    (
        {
            "name": "a",
            "configuration": {**SEMANTIC_CONFIG, "strategies": [{"type": "SUMMARY", "namespace": "user_id x"}]},
        },
        200,
        "",
    ),
    (
        {"name": "a", "configuration": {"retention_policy": {"sessions": {"max_count": 5}}}},
        403,
        "Cannot set retention_policy: the memory retention feature is not enabled. To enable it, please update the "
        "cluster setting plugins.ml_commons.memory.retention_enabled",
    ),
]


@pytest.mark.parametrize("body,status,reason", CREATE_ERRORS)
async def test_create_container_errors(api, alice, body, status, reason):
    if status == 200:
        await call(api, alice, "POST", "/_create", body)
    else:
        await error(api, alice, "POST", "/_create", body, status, reason)


async def test_wrong_json_type_is_a_parse_error(api, alice):
    await error(
        api,
        alice,
        "POST",
        "/_create",
        {"name": "a", "configuration": {"disable_session": "maybe"}},
        400,
        "[disable_session] must be a boolean",
        "x_content_parse_exception",
    )
    await error(
        api,
        alice,
        "POST",
        "/_create",
        {"name": "a", "configuration": {"index_prefix": "UP"}},
        400,
        "Invalid index_prefix",
        "parse_exception",
    )


async def test_update_container_errors(api, alice):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    strategy_id = (await call(api, alice, "GET", f"/{cid}"))["configuration"]["strategies"][0]["id"]
    await error(api, alice, "PUT", f"/{cid}", None, 400, "Request body is required")
    await error(
        api,
        alice,
        "PUT",
        f"/{cid}",
        {"configuration": {"embedding_model_id": "other"}},
        400,
        "Cannot change embedding configuration once strategies are configured.",
    )
    await error(
        api,
        alice,
        "PUT",
        f"/{cid}",
        {"configuration": {"strategies": [{"id": "semantic_00000000", "enabled": False}]}},
        404,
        "Strategy with id semantic_00000000 not found",
        "status_exception",
    )
    await error(
        api,
        alice,
        "PUT",
        f"/{cid}",
        {"configuration": {"strategies": [{"id": strategy_id, "type": "SUMMARY"}]}},
        400,
        f"Cannot change the type of strategy {strategy_id}",
    )
    plain = await container(api, alice)
    await error(
        api,
        alice,
        "PUT",
        f"/{plain}",
        {"configuration": {"strategies": [{"type": "SEMANTIC", "namespace": ["u"]}]}},
        400,
        "Strategies require both an LLM model and embedding model",
    )
    # no strategies yet: the embedding may change; then strategies may come
    await call(api, alice, "PUT", f"/{plain}", {"configuration": SEMANTIC_CONFIG})
    assert (await call(api, alice, "GET", f"/{plain}"))["configuration"]["strategies"][0]["type"] == "SEMANTIC"


async def test_memory_errors(api, alice, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    plain = await container(api, alice, {"disable_session": True})
    memories = f"/{cid}/memories"
    await error(api, alice, "POST", memories, None, 400, "Request body is required")
    await error(api, alice, "POST", memories, {"payload_type": "chat"}, 400, "Invalid payload_type: chat")
    await error(
        api, alice, "POST", memories, {"messages": [{"role": "user"}]}, 400, "Message must have role and content"
    )
    await error(
        api, alice, "POST", memories, {"messages": [{"content": []}]}, 400, "Message must have role and content"
    )
    await error(api, alice, "POST", memories, {"infer": True}, 400, "No messages provided when inferring memory")
    # the body is parsed before the container is looked up, as ml-commons' REST action parses it
    await error(api, alice, "POST", "/absent/memories", {"payload_type": "chat"}, 400, "Invalid payload_type: chat")
    await error(api, alice, "POST", "/absent/memories", {"messages": []}, 404, "Memory container not found")
    await error(
        api,
        alice,
        "POST",
        f"/{plain}/memories",
        {"messages": conversation("x"), "infer": True},
        400,
        "infer=true requires llm_model_id to be configured in memory storage",
    )
    await error(
        api,
        alice,
        "POST",
        memories,
        {"messages": conversation("x"), "pinned": True},
        400,
        "pinned field is not supported for working memory type. To preserve a conversation, pin the session instead.",
    )
    await error(
        api,
        alice,
        "POST",
        f"/{plain}/memories/sessions",
        {"summary": "x"},
        400,
        "Session is disabled for this container",
        "status_exception",
    )
    await error(api, alice, "POST", f"/{cid}/memories/sessions", None, 400, "Request body is required")
    for bad in ("session", "long_term", "x"):
        await error(
            api,
            alice,
            "GET",
            f"{memories}/{bad}/abc",
            None,
            400,
            f"Invalid memory type: {bad}. Must be one of: sessions, working, long-term, history",
        )
    await error(api, alice, "GET", f"/{plain}/memories/sessions/abc", None, 404, "Memory index not found")
    await error(api, alice, "GET", f"/{plain}/memories/long-term/abc", None, 404, "Memory index not found")
    await error(api, alice, "GET", f"{memories}/working/abc", None, 404, "Memory not found", "status_exception")
    await error(api, alice, "GET", "/nope/memories/working/abc", None, 404, "Memory container not found")
    await error(
        api, alice, "POST", "/nope/memories", {"messages": conversation("x")}, 404, "Memory container not found"
    )
    working = await call(
        api, alice, "POST", memories, {"messages": conversation("x"), "namespace": {"session_id": "s"}}
    )
    wid = working["working_memory_id"]
    await error(api, alice, "PUT", f"{memories}/working/{wid}", {}, 400, "Text cannot be null or empty")
    await error(api, alice, "PUT", f"{memories}/working/{wid}", None, 400, "Text cannot be null or empty")
    await error(api, alice, "PUT", f"{memories}/history/{wid}", {"memory": "x"}, 404, "Can't update memory history")
    await error(api, alice, "PUT", f"{memories}/sessions/s", {"pinned": True}, 403, "Cannot set pinned:")
    await error(api, alice, "POST", f"{memories}/working/_search", None, 400, "Search memories request has empty body")
    await error(
        api, alice, "POST", f"{memories}/working/_search", {"query": {"bogus": {}}}, 400, "unknown query [bogus]"
    )
    await error(
        api,
        alice,
        "POST",
        f"{memories}/working/_delete_by_query",
        {},
        400,
        "Query parameter is required for delete by query operation.",
    )
    await error(
        api,
        alice,
        "POST",
        f"/{plain}/memories/sessions/_delete_by_query",
        {"query": {"match_all": {}}},
        400,
        "Invalid memory type or memory type is disabled: sessions",
    )
    search = f"{memories}/long-term/_semantic_search"
    await error(api, alice, "POST", search, {"query": "  "}, 400, "query cannot be null or blank")
    await error(api, alice, "POST", search, {}, 400, "query cannot be null or blank")
    for k in (0, 10001):
        await error(api, alice, "POST", search, {"query": "x", "k": k}, 400, "k must be between 1 and 10000")
    await error(
        api,
        alice,
        "POST",
        f"/{plain}/memories/long-term/_semantic_search",
        {"query": "x"},
        400,
        "Semantic search needs a memory container with an embedding model",
    )
    hybrid = f"{memories}/long-term/_hybrid_search"
    await error(
        api,
        alice,
        "POST",
        hybrid,
        {"query": "x", "bm25_weight": 1.5, "neural_weight": -0.5},
        400,
        "bm25_weight must be between 0.0 and 1.0",
    )
    await error(
        api,
        alice,
        "POST",
        hybrid,
        {"query": "x", "bm25_weight": 0.5, "neural_weight": 0.6},
        400,
        "bm25_weight and neural_weight must sum to 1.0",
    )
    await error(
        api,
        alice,
        "POST",
        f"{memories}/working/_semantic_search",
        {"query": "x"},
        400,
        "Semantic and hybrid search are for long-term memory",
    )


async def test_delete_container_sharing_an_index_prefix_is_a_conflict(api, alice, bob):
    first, second = await container(api, alice), await container(api, alice)
    own_prefix = await container(api, alice, {"index_prefix": "mine"})
    await container(api, bob)  # another principal's container never counts, nor shows
    await error(
        api,
        alice,
        "DELETE",
        f"/{first}?delete_all_memories=true",
        None,
        409,
        "Cannot delete memory indices as multiple containers share the index prefix 'default'.",
        "status_exception",
    )
    await error(
        api, alice, "DELETE", f"/{first}?delete_memories=working,sessions", None, 409, "Cannot delete memory indices"
    )
    await error(api, alice, "DELETE", f"/{first}?delete_memories=session", None, 400, "Invalid memory type: session.")
    await call(api, alice, "DELETE", f"/{own_prefix}", {"delete_all_memories": True})
    await call(api, alice, "DELETE", f"/{first}")
    await call(api, alice, "DELETE", f"/{second}?delete_all_memories=true")  # the last one of the prefix


async def test_agentic_memory_can_be_switched_off(aiohttp_client, settings, embedder, alice):
    api = await aiohttp_client(create_app(settings.replace(agentic={"enabled": False}), embedder=embedder))
    for method, path in [
        ("POST", "/_create"),
        ("GET", "/x"),
        ("POST", "/_search"),
        ("POST", "/x/memories"),
        ("GET", "/x/memories/working/y"),
        ("POST", "/x/memories/long-term/_semantic_search"),
        ("GET", "/x/memories/working/y/"),  # OpenSearch's router ignores the trailing slash
        ("POST", "/x/memories/working/_search"),
        ("DELETE", "/x/memories/working/y"),
        ("POST", "/_retention/_dry_run"),
    ]:
        await error(
            api,
            alice,
            method,
            path,
            {"name": "a", "query": "q"},
            403,
            "The Agentic Memory APIs are not enabled. To enable, please update the setting "
            "plugins.ml_commons.agentic_memory_enabled",
            "status_exception",
        )
    # ml-commons checks the setting before it reads parameters or the body
    await error(api, alice, "GET", "/x?bogus=1", None, 403, "The Agentic Memory APIs are not enabled.")
    response = await api.post(BASE + "/_create", data=b"{not json", headers=alice.headers)
    assert response.status == 403, await response.text()
    # a method or path no endpoint serves is still the router's answer
    assert (await api.put(BASE + "/_search", json={}, headers=alice.headers)).status == 405
    assert (await api.patch(BASE + "/x", json={}, headers=alice.headers)).status == 405


async def test_retention_policy_and_pinning_when_enabled(aiohttp_client, settings, embedder, alice):
    api = await aiohttp_client(
        create_app(settings.replace(agentic={"retention": {"enabled": True}}), embedder=embedder)
    )
    cid = await container(api, alice, {"retention_policy": {"sessions": {"retention_days": 30}}})
    await error(
        api,
        alice,
        "POST",
        "/_create",
        {"name": "a", "configuration": {"retention_policy": {"working": {"max_count": 1}}}},
        400,
        "Working memory retention cannot be configured directly.",
    )
    await error(
        api,
        alice,
        "POST",
        "/_create",
        {"name": "a", "configuration": {"retention_policy": {"history": {"retention_days": 1}}}},
        400,
        "retention_days is not supported for history memory type",
    )
    await call(api, alice, "PUT", f"/{cid}", {"configuration": {"retention_policy": {"sessions": {"max_count": 9}}}})
    config = (await call(api, alice, "GET", f"/{cid}"))["configuration"]
    assert config["retention_policy"] == {"sessions": {"retention_days": 30, "max_count": 9}}
    await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s"})
    await call(api, alice, "PUT", f"/{cid}/memories/sessions/s", {"pinned": True})
    assert (await call(api, alice, "GET", f"/{cid}/memories/sessions/s"))["pinned"] is True


async def test_infer_without_a_configured_llm_names_the_setting(aiohttp_client, settings, embedder, alice):
    api = await aiohttp_client(create_app(settings, embedder=embedder))
    cid = await container(api, alice, SEMANTIC_CONFIG)
    await error(
        api,
        alice,
        "POST",
        f"/{cid}/memories",
        {"messages": conversation("x"), "infer": True},
        400,
        "infer=true needs an LLM connector, and none is configured: set url in [agentic.llm]",
    )
    # without infer, an add still works: the auto session simply has no summary
    added = await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation("x")})
    assert "summary" not in await call(api, alice, "GET", f"/{cid}/memories/sessions/{added['session_id']}")


async def test_another_principal_sees_nothing_on_any_path(api, alice, bob, carol, admin, llm):
    cid = await container(api, alice, SEMANTIC_CONFIG)
    await seed_long_term(api, alice, cid, llm, ["Alice's secret is the blue door"], user="alice")
    await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s-alice"})
    wid = (await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation("secret")}))[
        "working_memory_id"
    ]
    lt = (await call(api, alice, "POST", f"/{cid}/memories/long-term/_search", {"query": {"match_all": {}}}))["hits"][
        "hits"
    ][0]["_id"]
    hid = (await call(api, alice, "POST", f"/{cid}/memories/history/_search", {"query": {"match_all": {}}}))["hits"][
        "hits"
    ][0]["_id"]
    ids = {"sessions": "s-alice", "working": wid, "long-term": lt, "history": hid}
    # the organisation's own key (admin) uses every container of it: tests/http/test_agentic_sharing.py
    for other in (bob, carol):
        await error(api, other, "GET", f"/{cid}", None, 404, "Failed to find memory container")
        await error(api, other, "PUT", f"/{cid}", {"name": "mine"}, 404, "Memory container not found")
        await error(api, other, "DELETE", f"/{cid}", None, 404, "Memory container not found")
        await error(
            api, other, "POST", f"/{cid}/memories", {"messages": conversation("x")}, 404, "Memory container not found"
        )
        await error(
            api,
            other,
            "POST",
            f"/{cid}/memories/sessions",
            {"session_id": "s-alice"},
            404,
            "Memory container not found",
        )
        for memory_type, memory_id in ids.items():
            path = f"/{cid}/memories/{memory_type}"
            await error(api, other, "GET", f"{path}/{memory_id}", None, 404, "Memory container not found")
            refused = "Can't update memory history" if memory_type == "history" else "Memory container not found"
            await error(api, other, "PUT", f"{path}/{memory_id}", {"summary": "x", "memory": "x"}, 404, refused)
            await error(api, other, "DELETE", f"{path}/{memory_id}", None, 404, "Memory container not found")
            await error(
                api, other, "POST", f"{path}/_search", {"query": {"match_all": {}}}, 404, "Memory container not found"
            )
            await error(
                api,
                other,
                "POST",
                f"{path}/_delete_by_query",
                {"query": {"match_all": {}}},
                404,
                "Memory container not found",
            )
        for kind in ("_semantic_search", "_hybrid_search"):
            await error(
                api,
                other,
                "POST",
                f"/{cid}/memories/long-term/{kind}",
                {"query": "secret"},
                404,
                "Memory container not found",
            )
        assert (await call(api, other, "POST", "/_search", {"query": {"match_all": {}}}))["hits"]["hits"] == []
    # the other principal's own container of the same shape finds nothing of alice's either
    theirs = await container(api, bob, SEMANTIC_CONFIG)
    for path, body in [
        ("/_semantic_search", {"query": "secret blue door"}),
        ("/_hybrid_search", {"query": "secret blue door"}),
        ("/_search", {"query": {"match_all": {}}}),
    ]:
        assert (await call(api, bob, "POST", f"/{theirs}/memories/long-term{path}", body))["hits"]["hits"] == []
    # and alice still has everything
    for memory_type, memory_id in ids.items():
        await call(api, alice, "GET", f"/{cid}/memories/{memory_type}/{memory_id}")
    await settle(api)


async def test_documents_belong_to_the_container_in_the_path(api, alice):
    first, second = await container(api, alice), await container(api, alice)
    wid = (await call(api, alice, "POST", f"/{first}/memories", {"messages": conversation("x")}))["working_memory_id"]
    for method, body in (("GET", None), ("PUT", {"tags": {"a": "b"}}), ("DELETE", None)):
        await error(api, alice, method, f"/{second}/memories/working/{wid}", body, 404, "Memory not found")
    await call(api, alice, "GET", f"/{first}/memories/working/{wid}")


async def test_hostile_values(api, alice):
    cid = await container(api, alice)
    lone = {"messages": [{"role": "user", "content": [{"type": "text", "text": "\ud800 lone"}]}]}
    await error(
        api, alice, "POST", f"/{cid}/memories", lone, 400, "[messages[0].content[0].text] holds a lone surrogate"
    )
    await error(
        api,
        alice,
        "POST",
        f"/{cid}/memories/working/_search",
        {"query": {"term": {"\udfff": "x"}}},
        400,
        "the key [query.term.\\udfff] holds a lone surrogate",
    )
    odd = {"messages": [{"role": "user", "content": [{"type": "text", "text": "ü 🎉 \u0000"}]}], "tags": {"n": 10**30}}
    wid = (await call(api, alice, "POST", f"/{cid}/memories", odd))["working_memory_id"]
    stored = await call(api, alice, "GET", f"/{cid}/memories/working/{wid}")
    assert stored["tags"] == {"n": str(10**30)}
    await error(api, alice, "POST", f"/{cid}/memories", {"message_id": 2**40}, 400, "[message_id] is out of range")
    await error(
        api,
        alice,
        "POST",
        "/_create",
        {"name": "a", "configuration": {"max_infer_size": 10**100, "llm_id": "x"}},
        400,
        "[max_infer_size] is out of range",
    )
    many = {"query": {"terms": {"namespace.user_id": [str(n) for n in range(5000)]}}}
    assert (await call(api, alice, "POST", f"/{cid}/memories/working/_search", many))["hits"]["total"]["value"] == 0
