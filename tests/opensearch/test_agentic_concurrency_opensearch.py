"""The concurrent agentic updates of ``tests/http/test_agentic_concurrency.py`` on a real OpenSearch node, where
only ``if_seq_no``/``if_primary_term`` (retried on a conflict) keeps an update from being lost: the star import
brings the tests here, and the ``api`` fixture of ``test_agentic_opensearch`` (imported) overrides theirs."""

from __future__ import annotations

import pytest

from tests.http.test_agentic_concurrency import *  # noqa: F401,F403  (re-run them here)
from tests.opensearch.test_agentic_opensearch import api, index_prefix  # noqa: F401  (the OpenSearch app)

pytestmark = [pytest.mark.opensearch, pytest.mark.model]
