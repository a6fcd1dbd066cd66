"""Model groups on a real OpenSearch cluster (``tests/http/test_ml_model_groups.py`` runs there as its
``opensearch`` backend): the store's organisation-wide reads (``find``,
``organization``) that sharing a group within an organisation rests on."""

from __future__ import annotations

import pytest

from memory_plugin.ml.stores.opensearch import OpenSearchMLStore
from memory_plugin.settings import OpenSearchRegion
from tests.http.test_ml_model_groups import organisation_reads

pytestmark = [pytest.mark.opensearch]


async def test_organisation_reads_on_opensearch(opensearch_nodes, index_prefix):
    store = OpenSearchMLStore(OpenSearchRegion(hosts=(opensearch_nodes[0].url,), index_prefix=index_prefix))
    await store.open()
    try:
        await organisation_reads(store)
    finally:
        await store.close()
