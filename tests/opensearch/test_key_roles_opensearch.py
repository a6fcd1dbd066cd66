"""Backend roles on keys in the OpenSearch keys index, including an index made before roles existed (its
strict mapping learns the field when the next key is made)."""

from __future__ import annotations

import uuid

import pytest

from memory_plugin.auth import Principal
from memory_plugin.auth_opensearch import MAPPINGS, SETTINGS, OpenSearchKeyStore
from memory_plugin.settings import OpenSearchRegion

pytestmark = pytest.mark.opensearch


async def test_roles_are_stored_and_read_back_and_an_old_index_learns_them(opensearch_nodes) -> None:  # type: ignore[no-untyped-def]
    node = opensearch_nodes[0]
    prefix = f"kr-{uuid.uuid4().hex[:10]}"
    store = OpenSearchKeyStore(OpenSearchRegion(hosts=(node.url,), index_prefix=prefix))
    try:
        old_properties = {k: v for k, v in MAPPINGS["properties"].items() if k != "backend_roles"}
        old = {"settings": SETTINGS, "mappings": {**MAPPINGS, "properties": old_properties}}
        status, body = node.request("PUT", f"/{store.index}", old)
        assert status == 200, body
        status, body = node.request(
            "PUT",
            f"/{store.index}/_doc/key_old?refresh=true",
            {
                "key_id": "key_old",
                "secret_sha256": "0" * 64,
                "organization_id": "org-1",
                "user_id": "alice",
                "created_at": "2026-01-01T00:00:00Z",
                "revoked": False,
            },
        )
        assert status == 201, body
        entry, token = store.create("org-1", "dave", ["support"])
        read = await store.read()
        assert read["key_old"].backend_roles == () and read[entry.key_id].backend_roles == ("support",)
        principal = await store.authenticate(f"Bearer {token}")
        assert principal == Principal("org-1", "dave") and principal.backend_roles == ("support",)
        assert [e.backend_roles for e in store.entries() if e.key_id == entry.key_id] == [("support",)]
    finally:
        await store.close()
        node.request("DELETE", f"/{store.index}")
