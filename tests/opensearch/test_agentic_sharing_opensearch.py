"""Containers shared through ``backend_roles`` on a real OpenSearch cluster: the in-process suite of
``tests/http/test_agentic_sharing.py`` again, with the home region on OpenSearch, whose container listing
selects what the caller may use in the query itself (``opensearch_documents.usable_terms``)."""

from __future__ import annotations

import pytest

from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore
from tests.http.test_agentic_sharing import *  # noqa: F401,F403  (re-run the sharing suite here)
from tests.opensearch.test_agentic_opensearch import api, index_prefix  # noqa: F401  (the OpenSearch app)

pytestmark = [pytest.mark.opensearch, pytest.mark.model]


async def test_the_sharing_suite_really_runs_on_opensearch(api):  # type: ignore[no-untyped-def]  # noqa: F811
    assert isinstance(api.app[AGENTIC].store, OpenSearchAgenticStore)
