"""A real OpenSearch 2.19.1 node with the k-NN plugin, started through tests/support/opensearch."""

from __future__ import annotations

import pytest

from tests.support import opensearch as osn
from tests.support.live import unavailable
from tests.support.opensearch.engines import small_knn_index

pytestmark = pytest.mark.opensearch


def _require_prerequisites() -> None:
    missing = osn.missing_prerequisites()
    if not missing:
        return
    unavailable(f"real OpenSearch needs Java 17+ and Maven; missing: {', '.join(missing)}")


def test_single_node_version_plugin_and_knn_query() -> None:
    _require_prerequisites()
    node = osn.OpenSearchNode("test-node")
    try:
        node.start(timeout=240)
        assert node.is_running()
        assert node.url.startswith("http://127.0.0.1:")

        status, root = node.request("GET", "/")
        assert status == 200, root
        assert root["version"]["number"] == "2.19.1"

        status, plugins = node.request("GET", "/_cat/plugins?format=json")
        assert status == 200, plugins
        assert {"opensearch-knn"} <= {p["component"] for p in plugins}

        # lucene is the only engine that works with the Maven Central k-NN zip (no JNI libraries);
        # always name it explicitly: the 2.19 default engine (faiss) would crash the node.
        status, body = node.request("PUT", "/knn-test", small_knn_index("lucene", "tenant"))
        assert status == 200, body
        docs = {"1": ([1.0, 0.0, 0.0, 0.0], "a"), "2": ([0.0, 1.0, 0.0, 0.0], "a"), "3": ([1.0, 0.1, 0.0, 0.0], "b")}
        for doc_id, (vec, tenant) in docs.items():
            status, body = node.request("PUT", f"/knn-test/_doc/{doc_id}?refresh=true", {"vec": vec, "tenant": tenant})
            assert status == 201, body

        status, body = node.request(
            "POST",
            "/knn-test/_search",
            {
                "size": 3,
                "query": {
                    "knn": {"vec": {"vector": [1.0, 0.0, 0.0, 0.0], "k": 3, "filter": {"term": {"tenant": "a"}}}}
                },
            },
        )
        assert status == 200, body
        hits = body["hits"]["hits"]
        assert [h["_id"] for h in hits] == ["1", "2"]  # doc 3 filtered out
        # lucene cosinesimil: score = (1 + cos) / 2
        assert hits[0]["_score"] == pytest.approx(1.0, abs=1e-5)  # cos = 1
        assert hits[1]["_score"] == pytest.approx(0.5, abs=1e-5)  # cos = 0

        # stop and restart keeps the data (a failed region coming back)
        node.stop()
        assert not node.is_running()
        node.start(timeout=240)
        status, body = node.request("GET", "/knn-test/_count")
        assert status == 200 and body["count"] == 3, body
    finally:
        node.close()
    assert not node.is_running()
    assert not node.base_dir.exists()
