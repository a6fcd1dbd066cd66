"""Hostile or careless callers: no credential, someone else's data, malformed bodies."""

from __future__ import annotations

import base64
import re

import pytest

from memory_plugin.app import KEYS
from memory_plugin.openapi import openapi_document

OPERATIONS = [
    (method.upper(), path)
    for path, item in openapi_document()["paths"].items()
    for method in item
    if method in {"get", "post", "put", "delete"} and item[method].get("security") != []
]
#: What answers without a key: the health check and the console's own files, no data.
PUBLIC = {
    (method.upper(), path)
    for path, item in openapi_document()["paths"].items()
    for method in item
    if method in {"get", "post", "put", "delete"} and item[method].get("security") == []
}


def test_only_health_and_the_console_page_are_public():
    assert PUBLIC == {("GET", "/_health"), ("GET", "/_console"), ("GET", "/_console/{asset}")}


def concrete(path: str) -> str:
    return path.replace("{", "").replace("}", "-123456789012345678")


async def test_console_files_load_without_a_key_and_nothing_else_does(client):
    page = await client.get("/_console")
    assert page.status == 200 and page.content_type == "text/html"
    policy = page.headers["Content-Security-Policy"]
    assert policy.startswith("default-src 'self'") and "script-src 'self';" in policy and "unsafe" not in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff" and "Set-Cookie" not in page.headers
    html = await page.text()
    assert "<script>" not in html and not re.search(r"<[^>]*\son\w+\s*=", html)  # no inline script or handlers
    for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
        asset = await client.get(f"/_console/{name}")
        assert asset.status == 200 and asset.content_type == kind
    script = await (await client.get("/_console/console.js")).text()
    assert not re.search(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|localStorage|document\.cookie", script
    )
    for name in ("index.html", "__init__.py", "..%2f__init__.py", "%2e%2e%2fapp.py", "console.js.map"):
        missing = await client.get(f"/_console/{name}")
        assert missing.status in (401, 404), name  # never a file outside the page's own two
        assert (await missing.json())["status"] == missing.status
    assert (await client.get("/_plugins/_ml/memory")).status == 401


BAD_CREDENTIALS = {
    "none": None,
    "empty bearer": "Bearer ",
    "garbage bearer": "Bearer not-a-key",
    "unknown key": "Bearer key_0000000000000000.c2VjcmV0",
    "basic not base64": "Basic %%%",
    "basic no colon": "Basic " + base64.b64encode(b"nocolon").decode(),
    "other scheme": "Digest username=x",
    "bearer with NUL": "Bearer key_1.\x00",
}


async def test_every_endpoint_refuses_bad_credentials(client, subtests):
    """Each operation a subtest, on one app: an app per operation took most of the time."""
    for method, path in OPERATIONS:
        with subtests.test(f"{method} {path}"):
            for name, authorization in BAD_CREDENTIALS.items():
                headers = {} if authorization is None else {"Authorization": authorization}
                try:
                    response = await client.request(method, concrete(path), headers=headers, json={})
                except ValueError:  # aiohttp refuses to send some headers at all
                    continue
                assert response.status == 401, (name, method, path, response.status)
                body = await response.json()
                assert "errors" in body if path.startswith("/v2") else body["status"] == 401


async def test_revoked_and_wrong_secret_keys_are_refused(client, alice):
    key_id, secret = alice.token.split(".", 1)
    wrong = await client.get("/_plugins/_ml/memory", headers={"Authorization": f"Bearer {key_id}.{secret[:-1]}x"})
    assert wrong.status == 401
    client.app[KEYS].revoke(alice.key_id)
    client.app[KEYS]._checked_at = 0
    for method, path in OPERATIONS:
        response = await client.request(method, concrete(path), headers=alice.headers, json={})
        assert response.status == 401, (method, path)


async def test_keys_are_stored_hashed(keys, alice):
    stored = keys.path.read_text()
    assert alice.token.split(".", 1)[1] not in stored
    assert alice.key_id in stored


async def test_cross_user_and_cross_organisation_on_every_memory_path(client, alice, bob, carol):
    memory_id = (
        await (await client.post("/_plugins/_ml/memory", json={"name": "mine"}, headers=alice.headers)).json()
    )["memory_id"]
    message_id = (
        await (
            await client.post(
                f"/_plugins/_ml/memory/{memory_id}/messages", json={"input": "secret"}, headers=alice.headers
            )
        ).json()
    )["message_id"]
    attempts = [
        ("GET", f"/_plugins/_ml/memory/conversation/{memory_id}", None),
        ("POST", f"/_plugins/_ml/memory/conversation/{memory_id}", {"input": "x", "response": "y"}),
        ("DELETE", f"/_plugins/_ml/memory/conversation/{memory_id}", None),
        ("GET", f"/_plugins/_ml/memory/{memory_id}", None),
        ("PUT", f"/_plugins/_ml/memory/{memory_id}", {"name": "stolen"}),
        ("DELETE", f"/_plugins/_ml/memory/{memory_id}", None),
        ("GET", f"/_plugins/_ml/memory/{memory_id}/messages", None),
        ("POST", f"/_plugins/_ml/memory/{memory_id}/messages", {"input": "x"}),
        ("POST", f"/_plugins/_ml/memory/{memory_id}/_search", {"query": {"match_all": {}}}),
        ("GET", f"/_plugins/_ml/memory/message/{message_id}", None),
        ("PUT", f"/_plugins/_ml/memory/message/{message_id}", {"response": "stolen"}),
        ("GET", f"/_plugins/_ml/memory/message/{message_id}/traces", None),
    ]
    for intruder in (bob, carol):
        for method, path, body in attempts:
            response = await client.request(method, path, json=body, headers=intruder.headers)
            assert response.status == 404, (intruder.user_id, method, path, response.status)
        for listing in ("/_plugins/_ml/memory", "/_plugins/_ml/memory/conversation"):
            text = await (await client.get(listing, headers=intruder.headers)).text()
            assert memory_id not in text
        hits = await (
            await client.post(
                "/_plugins/_ml/memory/_search",
                json={"query": {"ids": {"values": [memory_id]}}},
                headers=intruder.headers,
            )
        ).json()
        assert hits["hits"]["hits"] == []
    mine = await (await client.get(f"/_plugins/_ml/memory/message/{message_id}", headers=alice.headers)).json()
    assert mine["input"] == "secret" and "response" not in mine
    assert (await (await client.get(f"/_plugins/_ml/memory/{memory_id}", headers=alice.headers)).json())[
        "name"
    ] == "mine"


async def test_cross_organisation_on_history_paths(client, admin, other_admin):
    record = {"record_id": "r-1", "record_type": "voice", "text": "confidential call about a merger"}
    assert (
        await client.post("/v2/ai/conversation_histories", json={"records": [record]}, headers=admin.headers)
    ).status == 201
    search = {"q": "merger", "record_type": "voice", "filter[organization_id]": "org-1"}
    found = await (await client.get("/v2/ai/conversation_histories", params=search, headers=other_admin.headers)).json()
    assert found["data"] == []
    assert (await client.delete("/v2/ai/conversation_histories/r-1", headers=other_admin.headers)).status == 404
    erased = await client.delete(
        "/v2/ai/conversation_histories", params={"filter[record_id]": "r-1"}, headers=other_admin.headers
    )
    assert (await erased.json())["data"] == {
        "deleted_records": 0,
        "deleted_chunks": 0,
        "deleted_memories": 0,
        "deleted_messages": 0,
        "deleted_memory_containers": 0,
        "deleted_ml_documents": 0,
    }
    # An attempt to write over another organisation's record id writes a record of one's own.
    assert (
        await client.post(
            "/v2/ai/conversation_histories",
            json={"records": [{**record, "text": "overwritten"}]},
            headers=other_admin.headers,
        )
    ).status == 201
    still = await (
        await client.get(
            "/v2/ai/conversation_histories", params={"q": "merger", "record_type": "voice"}, headers=admin.headers
        )
    ).json()
    assert [i["text"] for i in still["data"]] == ["confidential call about a merger"]


@pytest.mark.parametrize(
    ("path", "body", "status", "fragment"),
    [
        ("/_plugins/_ml/memory/conversation", b"[" * 5000 + b"]" * 5000, 400, "nests deeper"),
        ("/_plugins/_ml/memory/conversation", b'{"name": "\xff\xfe"}', 400, "UTF-8"),
        ("/_plugins/_ml/memory", b'{"name": "x"' + b" " * 10, 400, "Unexpected end-of-input"),
        ("/_plugins/_ml/memory", b'{"name": "\xff\xfe"}', 400, "Invalid UTF-8 start byte 0xff"),
        ("/v2/ai/conversation_histories", b'{"records": [' + b"[" * 3000 + b"]" * 3000 + b"]}", 400, "nests deeper"),
        ("/v2/ai/conversation_histories", b'{"records": "\xc3\x28"}', 400, "UTF-8"),
    ],
)
async def test_hostile_bodies_are_clear_400s(client, admin, path, body, status, fragment):
    response = await client.post(path, data=body, headers={**admin.headers, "Content-Type": "application/json"})
    assert response.status == status
    text = await response.text()
    assert fragment in text, text


async def test_oversized_body_and_headers(client, admin, settings):
    big = b'{"name": "' + b"x" * (settings.http.max_body_bytes + 10) + b'"}'
    response = await client.post(
        "/_plugins/_ml/memory/conversation", data=big, headers={**admin.headers, "Content-Type": "application/json"}
    )
    assert response.status == 413
    v2 = await client.post(
        "/v2/ai/conversation_histories", data=big, headers={**admin.headers, "Content-Type": "application/json"}
    )
    assert v2.status == 413 and (await v2.json())["errors"][0]["code"] == "payload_too_large"
    huge_header = await client.get("/_plugins/_ml/memory", headers={**admin.headers, "X-Padding": "y" * 70000})
    assert huge_header.status in (400, 431)
