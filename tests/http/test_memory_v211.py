"""The ML Commons 2.11 conversational memory API (seed 000, CONTRACT section 1)."""

from __future__ import annotations

import re

import pytest

from embedder import Embedder
from memory_plugin.app import create_app

pytestmark = pytest.mark.backends("embedded", "opensearch")

BASE = "/_plugins/_ml/memory/conversation"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def assert_opensearch_error(body: dict, status: int, type_: str, *fragments: str) -> None:
    assert body["status"] == status
    assert body["error"]["type"] == type_
    assert body["error"]["root_cause"] == [{"type": type_, "reason": body["error"]["reason"]}]
    for fragment in fragments:
        assert fragment in body["error"]["reason"], body


async def create_conversation(client, caller, name: str | None = "chat") -> str:
    body = {} if name is None else {"name": name}
    response = await client.post(BASE, json=body, headers=caller.headers)
    assert response.status == 200
    return (await response.json())["conversation_id"]


async def create_interaction(client, caller, conversation_id: str, n: int = 0) -> str:
    response = await client.post(
        f"{BASE}/{conversation_id}",
        json={
            "input": f"question {n}",
            "prompt_template": "Answer the question",
            "response": f"answer {n}",
            "origin": "RAG Pipeline",
            "additional_info": "[Document1, Document2]",
        },
        headers=caller.headers,
    )
    assert response.status == 200, await response.text()
    return (await response.json())["interaction_id"]


async def test_create_conversation_returns_long_url_safe_id(client, alice):
    conversation_id = await create_conversation(client, alice)
    assert re.fullmatch(r"[A-Za-z0-9_-]{20,}", conversation_id)


async def test_create_conversation_body_is_optional_and_name_defaults_to_empty(client, alice):
    response = await client.post(BASE, headers=alice.headers)
    assert response.status == 200
    listing = await (await client.get(BASE, headers=alice.headers)).json()
    assert listing["conversations"][0]["name"] == ""
    assert listing["conversations"][0]["conversation_id"] == (await response.json())["conversation_id"]


async def test_empty_list_has_no_next_token(client, alice):
    response = await client.get(BASE, headers=alice.headers)
    assert response.status == 200
    assert await response.json() == {"conversations": []}


async def test_conversations_page_newest_first(client, alice):
    first = await create_conversation(client, alice, "first")
    second = await create_conversation(client, alice, "second")
    page1 = await (await client.get(BASE, params={"max_results": 1}, headers=alice.headers)).json()
    assert [c["conversation_id"] for c in page1["conversations"]] == [second]
    assert page1["next_token"] == 1
    page2 = await (await client.get(BASE, params={"max_results": 1, "next_token": 1}, headers=alice.headers)).json()
    assert [c["conversation_id"] for c in page2["conversations"]] == [first]
    assert page2["next_token"] == 2
    page3 = await (await client.get(BASE, params={"max_results": 1, "next_token": 2}, headers=alice.headers)).json()
    assert page3 == {"conversations": []}
    conversation = page2["conversations"][0]
    assert set(conversation) == {"conversation_id", "create_time", "name"}
    assert conversation["name"] == "first"
    assert ISO.match(conversation["create_time"])


async def test_partial_page_has_no_next_token(client, alice):
    for n in range(3):
        await create_conversation(client, alice, f"c{n}")
    body = await (await client.get(BASE, params={"max_results": 5}, headers=alice.headers)).json()
    assert len(body["conversations"]) == 3
    assert "next_token" not in body
    default = await (await client.get(BASE, headers=alice.headers)).json()
    assert len(default["conversations"]) == 3


async def test_interactions_page_newest_first_with_all_fields(client, alice):
    conversation_id = await create_conversation(client, alice)
    first = await create_interaction(client, alice, conversation_id, 1)
    second = await create_interaction(client, alice, conversation_id, 2)
    url = f"{BASE}/{conversation_id}"
    page1 = await (await client.get(url, params={"max_results": 1}, headers=alice.headers)).json()
    assert [i["interaction_id"] for i in page1["interactions"]] == [second]
    assert page1["next_token"] == 1
    page2 = await (await client.get(url, params={"max_results": 1, "next_token": 1}, headers=alice.headers)).json()
    assert [i["interaction_id"] for i in page2["interactions"]] == [first]
    assert page2["next_token"] == 2
    interaction = page2["interactions"][0]
    assert interaction == {
        "conversation_id": conversation_id,
        "interaction_id": first,
        "create_time": interaction["create_time"],
        "input": "question 1",
        "prompt_template": "Answer the question",
        "response": "answer 1",
        "origin": "RAG Pipeline",
        "additional_info": "[Document1, Document2]",
    }
    assert ISO.match(interaction["create_time"])
    empty = await (await client.get(url, params={"next_token": 2}, headers=alice.headers)).json()
    assert empty == {"interactions": []}


async def test_optional_interaction_fields_are_null(client, alice):
    conversation_id = await create_conversation(client, alice)
    response = await client.post(
        f"{BASE}/{conversation_id}", json={"input": "hi", "response": "hello"}, headers=alice.headers
    )
    assert response.status == 200
    (interaction,) = (await (await client.get(f"{BASE}/{conversation_id}", headers=alice.headers)).json())[
        "interactions"
    ]
    assert interaction["prompt_template"] is None
    assert interaction["origin"] is None
    assert interaction["additional_info"] is None


async def test_delete_removes_conversation_and_interactions(client, alice):
    conversation_id = await create_conversation(client, alice)
    await create_interaction(client, alice, conversation_id)
    response = await client.delete(f"{BASE}/{conversation_id}", headers=alice.headers)
    assert response.status == 200
    assert await response.json() == {"success": True}
    listing = await client.get(f"{BASE}/{conversation_id}", headers=alice.headers)
    assert listing.status == 404
    assert_opensearch_error(await listing.json(), 404, "resource_not_found_exception", conversation_id)
    assert (await (await client.get(BASE, headers=alice.headers)).json()) == {"conversations": []}
    again = await client.delete(f"{BASE}/{conversation_id}", headers=alice.headers)
    assert again.status == 404
    add = await client.post(f"{BASE}/{conversation_id}", json={"input": "a", "response": "b"}, headers=alice.headers)
    assert add.status == 404


@pytest.mark.parametrize("method", ["get", "delete", "post"])
async def test_unknown_conversation_is_404(client, alice, method):
    kwargs = {"json": {"input": "a", "response": "b"}} if method == "post" else {}
    response = await getattr(client, method)(f"{BASE}/no-such-conversation-000", headers=alice.headers, **kwargs)
    assert response.status == 404
    assert_opensearch_error(await response.json(), 404, "resource_not_found_exception", "no-such-conversation-000")


# -- bad input -----------------------------------------------------------------------


async def test_malformed_json_is_400(client, alice):
    conversation_id = await create_conversation(client, alice)
    for url in (BASE, f"{BASE}/{conversation_id}"):
        response = await client.post(
            url, data=b'{"name": "x",', headers={**alice.headers, "Content-Type": "application/json"}
        )
        assert response.status == 400
        assert_opensearch_error(await response.json(), 400, "parse_exception", "Failed to parse request body")


async def test_non_object_body_is_400(client, alice):
    response = await client.post(BASE, json=["name"], headers=alice.headers)
    assert response.status == 400
    assert_opensearch_error(await response.json(), 400, "parse_exception", "JSON object")


@pytest.mark.parametrize("field", ["input", "prompt_template", "response", "origin", "additional_info"])
@pytest.mark.parametrize("value", [42, True, {"a": "b"}, ["x"]])
async def test_non_string_interaction_field_is_400(client, alice, field, value):
    conversation_id = await create_conversation(client, alice)
    body = {"input": "q", "response": "a", field: value}
    response = await client.post(f"{BASE}/{conversation_id}", json=body, headers=alice.headers)
    assert response.status == 400
    assert_opensearch_error(await response.json(), 400, "illegal_argument_exception", f"[{field}]", "must be a string")


async def test_non_string_name_is_400(client, alice):
    response = await client.post(BASE, json={"name": 7}, headers=alice.headers)
    assert response.status == 400
    assert_opensearch_error(await response.json(), 400, "illegal_argument_exception", "[name]")


async def test_missing_body_on_create_interaction_is_400(client, alice):
    conversation_id = await create_conversation(client, alice)
    response = await client.post(f"{BASE}/{conversation_id}", headers=alice.headers)
    assert response.status == 400
    assert_opensearch_error(await response.json(), 400, "parse_exception", "request body is required")


@pytest.mark.parametrize("field", ["input", "response"])
async def test_missing_required_interaction_field_is_400(client, alice, field):
    conversation_id = await create_conversation(client, alice)
    body = {"input": "q", "response": "a"}
    del body[field]
    response = await client.post(f"{BASE}/{conversation_id}", json=body, headers=alice.headers)
    assert response.status == 400
    assert_opensearch_error(await response.json(), 400, "illegal_argument_exception", f"[{field}] is required")


@pytest.mark.parametrize(
    ("params", "type_", "fragment"),
    [
        ({"max_results": "0"}, "action_request_validation_exception", "Validation Failed: 1: "),
        ({"max_results": "-1"}, "action_request_validation_exception", "Validation Failed: 1: "),
        (
            {"max_results": "abc"},
            "illegal_argument_exception",
            "Failed to parse int parameter [max_results] with value [abc]",
        ),
        ({"max_results": "10001"}, "action_request_validation_exception", "max_results"),
        ({"next_token": "-1"}, "action_request_validation_exception", "The starting position must be nonnegative"),
        ({"next_token": "x"}, "illegal_argument_exception", "[next_token]"),
        ({"bogus": "1"}, "illegal_argument_exception", "unrecognized parameter: [bogus]"),
    ],
)
async def test_bad_paging_parameters_are_400(client, alice, params, type_, fragment):
    conversation_id = await create_conversation(client, alice)
    for url in (BASE, f"{BASE}/{conversation_id}"):
        response = await client.get(url, params=params, headers=alice.headers)
        assert response.status == 400
        assert_opensearch_error(await response.json(), 400, type_, fragment)


async def test_global_opensearch_parameters_are_accepted(client, alice):
    response = await client.get(BASE, params={"pretty": "true", "error_trace": "false"}, headers=alice.headers)
    assert response.status == 200


async def test_unknown_parameter_on_create_and_delete_is_400(client, alice):
    response = await client.post(BASE, params={"foo": "1"}, json={}, headers=alice.headers)
    assert response.status == 400
    conversation_id = await create_conversation(client, alice)
    response = await client.delete(f"{BASE}/{conversation_id}", params={"foo": "1"}, headers=alice.headers)
    assert response.status == 400
    assert (await client.get(f"{BASE}/{conversation_id}", headers=alice.headers)).status == 200


async def test_oversized_body_is_413(client, alice, settings):
    conversation_id = await create_conversation(client, alice)
    big = "x" * (settings.http.max_body_bytes + 1)
    response = await client.post(
        f"{BASE}/{conversation_id}", json={"input": big, "response": "a"}, headers=alice.headers
    )
    assert response.status == 413
    assert_opensearch_error(await response.json(), 413, "content_too_long_exception", "larger than")


async def test_wrong_method_is_405(client, alice):
    response = await client.patch(BASE, json={}, headers=alice.headers)
    assert response.status == 405
    # OpenSearch's REST layer answers a wrong method before any handler: a bare error string.
    body = await response.json()
    assert body["status"] == 405
    assert body["error"].startswith(f"Incorrect HTTP method for uri [{BASE}] and method [PATCH], allowed: [")


# -- access ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer nope", "Bearer key_0000.wrong", "Basic !!!", "Basic " + "dXNlcjpwYXNz", "Token abc"],
)
async def test_missing_or_wrong_credential_is_401(client, alice, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, url in (("get", BASE), ("post", BASE), ("get", "/")):
        response = await client.request(method, url, headers=headers)
        assert response.status == 401
        assert_opensearch_error(await response.json(), 401, "security_exception")


async def test_health_needs_no_credential(client, embedder):
    response = await client.get("/_health")
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "green"
    described = embedder.describe() if isinstance(embedder, Embedder) else {"name": type(embedder).__name__}
    assert body["details"]["model"] == described, "says what embeds"


async def test_root_answers_like_an_opensearch_node(client, alice):
    body = await (await client.get("/", headers=alice.headers)).json()
    assert body["version"]["distribution"] == "opensearch"
    assert body["version"]["number"] == "3.9.0"  # the newest OpenSearch whose memory APIs are all served here
    assert {"name", "cluster_name", "tagline"} <= set(body)


async def test_basic_auth_is_accepted(client, alice):
    response = await client.post(BASE, json={"name": "basic"}, headers=alice.basic_headers)
    assert response.status == 200


async def test_revoked_key_is_401(client, alice, keys):
    assert (await client.get(BASE, headers=alice.headers)).status == 200
    keys.revoke(alice.key_id)
    from memory_plugin.app import KEYS

    client.app[KEYS]._checked_at = 0  # the server re-reads the keys file at most once a second
    response = await client.get(BASE, headers=alice.headers)
    assert response.status == 401
    assert "revoked" in (await response.json())["error"]["reason"]


async def test_other_users_conversation_is_invisible(client, alice, bob, carol):
    conversation_id = await create_conversation(client, alice, "private")
    await create_interaction(client, alice, conversation_id)
    for other in (bob, carol):
        assert (await client.get(f"{BASE}/{conversation_id}", headers=other.headers)).status == 404
        listing = await (await client.get(BASE, headers=other.headers)).json()
        assert listing == {"conversations": []}
        add = await client.post(
            f"{BASE}/{conversation_id}", json={"input": "x", "response": "y"}, headers=other.headers
        )
        assert add.status == 404
        assert (await client.delete(f"{BASE}/{conversation_id}", headers=other.headers)).status == 404
    # The owner still has everything.
    interactions = await (await client.get(f"{BASE}/{conversation_id}", headers=alice.headers)).json()
    assert len(interactions["interactions"]) == 1


async def test_metrics_need_the_operator_token_and_count_requests_by_route(aiohttp_client, settings, embedder, alice):
    client = await aiohttp_client(
        create_app(settings.replace(auth={"metrics_token": "operator-secret"}), embedder=embedder)
    )
    assert (await client.get("/_metrics")).status == 401
    await client.get(BASE, headers=alice.headers)
    assert (await client.get("/_metrics", headers=alice.headers)).status == 403
    response = await client.get("/_metrics", headers={"Authorization": "Bearer operator-secret"})
    assert response.status == 200
    text = await response.text()
    assert 'memory_plugin_requests_total{method="GET",route="/_plugins/_ml/memory/conversation",status="200"}' in text
    assert "memory_plugin_request_seconds_bucket" in text


async def test_request_id_is_echoed_or_made(client, alice):
    response = await client.get(BASE, headers={**alice.headers, "X-Request-Id": "trace-123"})
    assert response.headers["X-Request-Id"] == "trace-123"
    generated = await client.get(BASE)
    assert len(generated.headers["X-Request-Id"]) == 32
