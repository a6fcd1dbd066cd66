"""Model groups on a real OpenSearch cluster: the in-process suite of ``tests/http/test_ml_model_groups.py``
again with the home region on OpenSearch, and the store's organisation-wide reads (``find``,
``organization``) that sharing a group within an organisation rests on."""

from __future__ import annotations

import pytest

from memory_plugin.ml.routes import ML as ML_SERVICE
from memory_plugin.ml.stores.opensearch import OpenSearchMLStore
from memory_plugin.settings import OpenSearchRegion
from tests.http.test_ml_model_groups import *  # noqa: F401,F403  (re-run the model group suite here)
from tests.http.test_ml_model_groups import organisation_reads
from tests.opensearch.test_ml_opensearch import index_prefix, ml, settings  # noqa: F401  (the OpenSearch app)

pytestmark = [pytest.mark.opensearch]


async def test_the_suite_really_runs_on_opensearch(ml):  # type: ignore[no-untyped-def]  # noqa: F811
    assert isinstance(ml.app[ML_SERVICE].store, OpenSearchMLStore)


async def test_organisation_reads_on_opensearch(opensearch_nodes, index_prefix):  # noqa: F811
    store = OpenSearchMLStore(OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix))
    await store.open()
    try:
        await organisation_reads(store)
    finally:
        await store.close()
