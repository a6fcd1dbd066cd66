"""``GET /_console/whoami``: who the key is, for the console to mark agentic containers as the caller's own or
shared with it; without a key, the API's 401 like every other authenticated path."""

from __future__ import annotations

from tests.http.test_agentic_sharing import role_caller


async def test_whoami_names_the_keys_principal(client, keys, admin):
    dave = role_caller(keys, "org-1", "dave", "support", "ops")
    answer = await client.get("/_console/whoami", headers=dave.headers)
    assert answer.status == 200
    assert "default-src 'self'" in answer.headers["Content-Security-Policy"]
    assert await answer.json() == {"organization_id": "org-1", "user_id": "dave", "backend_roles": ["support", "ops"]}
    organisation = await client.get("/_console/whoami", headers=admin.headers)
    assert await organisation.json() == {"organization_id": "org-1", "user_id": None, "backend_roles": []}


async def test_whoami_needs_a_key(client):
    refused = await client.get("/_console/whoami")
    assert refused.status == 401
    assert (await refused.json())["status"] == 401
    page = await client.get("/_console/console.js")  # the page's own files still load without one
    assert page.status == 200
