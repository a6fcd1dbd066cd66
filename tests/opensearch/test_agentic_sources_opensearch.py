"""``?sources=true`` on a real OpenSearch cluster: the HTTP suite of ``tests/http/test_agentic_sources.py`` again
(the ``api`` fixture below puts the home region on OpenSearch)."""

from __future__ import annotations

import pytest

from tests.http.test_agentic_memory_sources import *  # noqa: F403  (re-run the sources suite here)
from tests.opensearch.test_agentic_opensearch import api, index_prefix  # noqa: F401  (the OpenSearch app)

pytestmark = [pytest.mark.opensearch, pytest.mark.model]
