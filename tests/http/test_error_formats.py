"""Each API answers errors in its own format, decided by the sub-app that serves it, never by
the path's text: an id that reads ``v2``, or a mount prefix that contains ``/v2/``, changes
nothing (issue 22)."""

from __future__ import annotations

import pytest
from aiohttp import web

from memory_plugin.app import create_app


def assert_opensearch_error(body: dict, status: int) -> None:
    assert "errors" not in body, body
    assert body["status"] == status, body
    assert "error" in body, body


def assert_v2_error(body: dict) -> None:
    (error,) = body["errors"]
    assert {"code", "title", "detail"} <= set(error), body


@pytest.mark.parametrize(
    "path",
    [
        "/_plugins/_ml/memory/v2",
        "/_plugins/_ml/memory/message/v2",
        "/_plugins/_ml/memory/conversation/v2",
        "/_plugins/_ml/memory/message/v2/traces",
    ],
)
async def test_an_id_that_reads_v2_gets_opensearch_errors(client, alice, path):
    response = await client.get(path, headers=alice.headers)
    assert response.status == 404
    assert_opensearch_error(await response.json(), 404)


async def test_a_container_named_v2_gets_opensearch_errors(client, alice):
    response = await client.get("/_plugins/_ml/memory_containers/v2", headers=alice.headers)
    assert response.status in (403, 404)
    assert_opensearch_error(await response.json(), response.status)


async def test_unknown_paths_answer_in_the_format_of_the_api_they_fall_under(client, alice):
    v2 = await client.get("/v2/ai/no_such_thing", headers=alice.headers)
    assert v2.status == 404
    assert_v2_error(await v2.json())
    plugins = await client.get("/_plugins/_ml/no_such_thing/v2", headers=alice.headers)
    assert plugins.status == 400 and "no handler found" in (await plugins.json())["error"]


async def test_mounted_under_a_prefix_that_contains_v2(aiohttp_client, settings, embedder, alice):
    host = web.Application()
    host.add_subapp("/v2/x", create_app(settings, embedder=embedder))
    client = await aiohttp_client(host)
    base = "/v2/x"

    unauthenticated = await client.get(base + "/_plugins/_ml/memory")
    assert unauthenticated.status == 401
    assert_opensearch_error(await unauthenticated.json(), 401)
    missing = await client.get(base + "/_plugins/_ml/memory/nope", headers=alice.headers)
    assert missing.status == 404
    assert_opensearch_error(await missing.json(), 404)
    bad_param = await client.get(base + "/_plugins/_ml/memory", params={"max_results": "x"}, headers=alice.headers)
    assert bad_param.status == 400
    assert_opensearch_error(await bad_param.json(), 400)
    container = await client.get(base + "/_plugins/_ml/memory_containers/v2", headers=alice.headers)
    assert_opensearch_error(await container.json(), container.status)
    unrouted = await client.get(base + "/_plugins/_ml/nothing", headers=alice.headers)
    assert unrouted.status == 400 and "no handler found" in (await unrouted.json())["error"]

    v2_unauthenticated = await client.get(base + "/v2/ai/conversation_histories")
    assert v2_unauthenticated.status == 401
    assert_v2_error(await v2_unauthenticated.json())
    v2_bad = await client.get(
        base + "/v2/ai/conversation_histories",
        params={"q": "x", "record_type": "voice", "top_k": "0"},
        headers=alice.headers,
    )
    assert v2_bad.status == 400
    assert_v2_error(await v2_bad.json())
    v2_unrouted = await client.get(base + "/v2/ai/nothing", headers=alice.headers)
    assert v2_unrouted.status == 404
    assert_v2_error(await v2_unrouted.json())
    await client.close()
