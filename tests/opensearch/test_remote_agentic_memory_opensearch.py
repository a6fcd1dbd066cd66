"""ml-commons' remote agentic memory requests, SigV4-signed, against the server with its home region on a real
OpenSearch cluster: ``tests/http/test_remote_agentic_memory.py`` again, with its settings on OpenSearch."""

from __future__ import annotations

import pytest

from memory_plugin.settings import Settings
from tests.http.test_remote_agentic_memory import *  # noqa: F401,F403  (re-run the suite here)
from tests.http.test_remote_agentic_memory import REGION
from tests.opensearch.test_agentic_opensearch import _on_opensearch, index_prefix  # noqa: F401

pytestmark = pytest.mark.opensearch


@pytest.fixture
def remote_settings(settings: Settings, sigv4_file, opensearch_nodes, index_prefix) -> Settings:  # type: ignore[no-untyped-def]  # noqa: F811
    return _on_opensearch(settings, opensearch_nodes, index_prefix).replace(
        auth={"sigv4_keys_file": sigv4_file, "sigv4_region": REGION}
    )


async def test_the_remote_suite_really_runs_on_opensearch(remote) -> None:  # type: ignore[no-untyped-def]
    from memory_plugin.agentic.routes import AGENTIC
    from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore

    assert isinstance(remote.app[AGENTIC].store, OpenSearchAgenticStore)
