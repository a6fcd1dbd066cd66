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


async def test_mounted_under_v2_routing_errors_and_the_console_answer_as_at_the_root(
    aiohttp_client, settings, embedder, alice
):
    """Every sub-app (``/_plugins``, ``/v2``, the console) and the root keep their own format under a ``/v2/`` mount."""
    host = web.Application()
    host.add_subapp("/v2/x", create_app(settings, embedder=embedder))
    client = await aiohttp_client(host)
    base = "/v2/x"

    unknown = await client.get(base + "/nope", headers=alice.headers)
    assert unknown.status == 400
    assert await unknown.json() == {"error": "no handler found for uri [/v2/x/nope] and method [GET]"}

    page = await client.get(base + "/_console")
    assert page.status == 200 and page.content_type == "text/html"
    no_asset = await client.get(base + "/_console/nope")
    assert no_asset.status == 404
    assert_opensearch_error(await no_asset.json(), 404)
    console_method = await client.post(base + "/_console", headers=alice.headers)
    assert console_method.status == 405
    assert await console_method.json() == {
        "error": "Incorrect HTTP method for uri [/v2/x/_console] and method [POST], allowed: [GET]",
        "status": 405,
    }

    plugins_method = await client.put(base + "/_plugins/_ml/memory", headers=alice.headers)
    assert plugins_method.status == 405
    assert await plugins_method.json() == {
        "error": "Incorrect HTTP method for uri [/v2/x/_plugins/_ml/memory] and method [PUT], allowed: [GET, POST]",
        "status": 405,
    }
    not_json = await client.post(
        base + "/_plugins/_ml/memory", data="{}", headers={**alice.headers, "Content-Type": "text/plain"}
    )
    assert not_json.status == 406
    assert await not_json.json() == {"error": "Content-Type header [text/plain] is not supported", "status": 406}

    v2_method = await client.put(base + "/v2/ai/conversation_histories", headers=alice.headers)
    assert v2_method.status == 405
    assert_v2_error(body := await v2_method.json())
    assert body["errors"][0]["code"] == "invalid_parameter"
    assert "[/v2/x/v2/ai/conversation_histories] and method [PUT]" in body["errors"][0]["detail"]
    await client.close()
