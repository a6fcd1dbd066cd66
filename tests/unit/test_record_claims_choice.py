"""Which record-id claims a deployment uses is the home region's store's to say (``HistoryStore.record_claims``):
this process's locks for an embedded home, leases in the cluster, under the store's own prefix and through its
own client, for an OpenSearch home."""

from __future__ import annotations

from pathlib import Path

from memory_plugin.histories.stores import open_histories_store
from memory_plugin.histories.stores.local_claims import LocalRecordClaims
from memory_plugin.histories.stores.opensearch import OpenSearchHistoryStore
from memory_plugin.histories.stores.opensearch_claims import OpenSearchRecordClaims
from memory_plugin.settings import EmbeddedRegion, OpenSearchRegion, Settings


async def test_an_embedded_home_holds_this_process_locks(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, regions={"USA": EmbeddedRegion()}, home_region="USA")
    store = open_histories_store(settings, "USA")
    assert isinstance(store.record_claims(), LocalRecordClaims)


async def test_an_opensearch_home_holds_leases_in_its_own_cluster(tmp_path: Path) -> None:
    region = OpenSearchRegion(hosts=("http://127.0.0.1:1",), index_prefix="Fleet-USA")
    settings = Settings(data_dir=tmp_path, regions={"USA": region}, home_region="USA")
    store = open_histories_store(settings, "USA")
    assert isinstance(store, OpenSearchHistoryStore)
    try:
        claims = store.record_claims()
        assert isinstance(claims, OpenSearchRecordClaims)
        assert claims.client is store.client
        assert claims.index == "fleet-usa-record-claims"
    finally:
        await store.close()
