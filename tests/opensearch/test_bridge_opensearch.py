"""The bridge's outbox with the home region (memory, outbox and records) on a real OpenSearch cluster.

The star import re-runs every test of ``tests/http/test_bridge_outbox.py`` here; the
``client`` fixture below overrides that module's with an OpenSearch home region.
"""

from __future__ import annotations

import uuid

import pytest

from memory_plugin.app import BRIDGE, create_app
from memory_plugin.memory.stores.opensearch import OpenSearchMemoryStore
from memory_plugin.settings import OpenSearchRegion
from tests.http.test_bridge_outbox import *  # noqa: F401,F403  (re-run the outbox suite here)
from tests.http.test_bridge_outbox import METRICS_TOKEN
from tests.support.polling import PATIENCE

pytestmark = pytest.mark.opensearch


@pytest.fixture
async def client(aiohttp_client, settings, flaky, opensearch_nodes, alice, bob):  # type: ignore[no-untyped-def]
    prefix = f"mp-bridge-{uuid.uuid4().hex[:12]}"
    # 80 writes at once queue for the client's connections: on a loaded machine a request's 10 s default
    # (which counts that wait) ran out, and the write answered 500.
    region = OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=prefix, timeout=PATIENCE)
    app_settings = settings.replace(
        regions={"USA": region},
        home_region="USA",
        bridge={"enabled": True, "retry_max_seconds": 0.2},
        auth={"metrics_token": METRICS_TOKEN},
    )
    yield await aiohttp_client(create_app(app_settings, embedder=flaky))
    opensearch_nodes[0].request("DELETE", f"/{prefix}-*")


async def test_the_outbox_really_is_on_opensearch(client, alice, opensearch_nodes):  # type: ignore[no-untyped-def]
    store = client.server.app[BRIDGE].store
    assert isinstance(store, OpenSearchMemoryStore) and store.outbox
    status, body = opensearch_nodes[0].request("GET", f"/{store.outbox_index}/_mapping")
    assert status == 200, body
