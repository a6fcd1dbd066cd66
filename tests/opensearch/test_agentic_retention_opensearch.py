"""Retention and custom container ids with agentic memory on a real OpenSearch cluster (2.19.1).

The embedded store's suites (``tests/http/test_agentic_retention.py`` and the load test) run again here:
the star imports bring their tests in, and the ``api`` fixture below overrides theirs.  On OpenSearch
the deletes are conditional on ``if_seq_no``/``if_primary_term``, and the custom id's conflict is the
create's 409.  The whole-container runs (a role holder's sessions taken by the owner's execute and by the
sweep, the organisation key's dry-runs and execute over its users' containers) run here too, where every
writer's docs of a prefix share one index and only the container and organisation terms select them.
"""

from __future__ import annotations

import pytest

from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore
from memory_plugin.agentic.stores.retention_opensearch import OpenSearchRetention
from memory_plugin.app import create_app
from tests.http.test_agentic_retention import *  # noqa: F401,F403  (re-run the retention suite here)
from tests.http.test_agentic_retention import container, session_with
from tests.http.test_agentic_retention_load import *  # noqa: F401,F403
from tests.opensearch.test_agentic_opensearch import _on_opensearch, index_prefix  # noqa: F401

pytestmark = [pytest.mark.opensearch, pytest.mark.model]


@pytest.fixture
async def api(aiohttp_client, settings, embedder, llm, opensearch_nodes, index_prefix, alice, bob, carol, admin):  # type: ignore[no-untyped-def]  # noqa: F811
    settings = _on_opensearch(settings, opensearch_nodes, index_prefix).replace(
        agentic={
            "llm": {"url": str(llm.server.make_url("/v1/chat/completions")), "api_key": "sk-test"},
            "retention": {"enabled": True},
        }
    )
    return await aiohttp_client(create_app(settings, embedder=embedder))


async def test_the_retention_suite_really_runs_on_opensearch(api, alice):  # type: ignore[no-untyped-def]  # noqa: F811
    service = api.app[AGENTIC]
    assert isinstance(service.store, OpenSearchAgenticStore)
    assert isinstance(service.retention.store, OpenSearchRetention)
    cid = await container(api, alice, {"retention_policy": {"sessions": {"max_count": 1}}})
    await session_with(api, alice, cid, "s")
    assert [doc.id for _, doc in await service.retention.store.every_container()] == [cid]
