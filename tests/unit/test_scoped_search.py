"""The checks and rewrites around a memory ``_search`` sent to OpenSearch (the real runs are in tests/opensearch)."""

from __future__ import annotations

from typing import Any

import pytest

from memory_plugin.errors import OpenSearchBadRequest
from memory_plugin.memory.stores.scoped_search import public_error, public_response, scoped_search

OWNER = [{"term": {"memory_plugin.organization_id": "org-1"}}, {"term": {"memory_plugin.user": "bob"}}]
NAMES = {"p-memory-meta-v2": ".plugins-ml-memory-meta", "p-memory-meta": ".plugins-ml-memory-meta"}


def test_the_query_is_wrapped_in_the_owner_filter_and_the_source_is_ours_to_filter() -> None:
    search = scoped_search(
        {"query": {"match": {"name": "x"}}, "_source": ["name"], "post_filter": {"term": {"user": "bob"}}},
        must=[{"term": {"memory_id": "m"}}],
        scope=OWNER,
    )
    assert search.body == {
        "query": {"bool": {"must": [{"match": {"name": "x"}}, {"term": {"memory_id": "m"}}], "filter": OWNER}},
        "post_filter": {"term": {"user": "bob"}},
        "_source": True,
        "version": True,
        "seq_no_primary_term": True,
    }
    assert search.source.includes == ("name",)
    assert scoped_search(None, scope=OWNER).body["query"]["bool"]["must"] == [{"match_all": {}}]
    assert scoped_search({"_source": False}, scope=OWNER).source.enabled, "ml-commons always fetches the source"


@pytest.mark.parametrize(
    "body",
    [
        {"query": {"terms": {"name": {"index": "other", "id": "1", "path": "name"}}}},
        {"query": {"bool": {"should": [{"more_like_this": {"like": [{"_index": "x", "_id": "1"}]}}]}}},
        {"query": {"constant_score": {"filter": {"script": {"script": "true"}}}}},
        {"query": {"wrapper": {"query": "e30="}}},
        {"aggs": {"a": {"global": {}}}},
        {"aggs": {"a": {"terms": {"field": "user", "min_doc_count": "0"}}}},
        {"sort": [{"memory_plugin.id": "asc"}]},
        {"query": {"term": {"memory_plugin": "x"}}},
        {"query": {"query_string": {"query": "x", "fields": ["memory_plugin*"]}}},
        {"docvalue_fields": [{"field": "memory_plugin.user"}]},
        {"suggest": {}},
        {"indices_boost": []},
        {"_source": 5},
        {"unknown": {}},
    ],
)
def test_reads_beyond_the_scope_are_refused_before_sending(body: dict[str, Any]) -> None:
    with pytest.raises(OpenSearchBadRequest) as refused:
        scoped_search(body, scope=OWNER)
    assert refused.value.opensearch_body()["status"] == 400


def test_text_that_merely_mentions_a_refused_word_is_fine() -> None:
    scoped_search({"query": {"match": {"name": "script global percolate memory_plugin"}}}, scope=OWNER)
    scoped_search({"aggs": {"a": {"terms": {"field": "user", "min_doc_count": 1}}}}, scope=OWNER)


def test_answers_show_ml_commons_documents_and_index_names_only() -> None:
    search = scoped_search({"_source": {"excludes": ["user"]}}, scope=OWNER)
    stored = {"name": "n", "user": "bob", "memory_plugin": {"organization_id": "org-1"}}
    response = {
        "hits": {
            "hits": [
                {
                    "_index": "p-memory-meta-v2",
                    "_id": "1",
                    "_source": stored,
                    "fields": {"name": ["n"], "memory_plugin.user": ["bob"]},
                    "highlight": {"memory_plugin.user": ["<em>bob</em>"]},
                    "inner_hits": {
                        "u": {"hits": {"hits": [{"_index": "p-memory-meta-v2", "_id": "1", "_source": stored}]}}
                    },
                }
            ]
        },
        "aggregations": {"i": {"buckets": [{"key": "p-memory-meta-v2", "doc_count": 1}]}},
    }
    answer = public_response(
        response, search, document=lambda _, source: {"name": source["name"], "user": "bob"}, names=NAMES
    )
    (hit,) = answer["hits"]["hits"]
    assert hit["_index"] == ".plugins-ml-memory-meta" and hit["_source"] == {"name": "n"}
    assert hit["fields"] == {"name": ["n"]} and hit["highlight"] == {}
    assert hit["inner_hits"]["u"]["hits"]["hits"][0]["_source"] == {"name": "n", "user": "bob"}
    assert answer["aggregations"]["i"]["buckets"][0]["key"] == ".plugins-ml-memory-meta"
    error = public_error({"error": {"reason": "no such index [p-memory-meta-v2]", "index": "p-memory-meta-v2"}}, NAMES)
    assert error == {
        "error": {"reason": "no such index [.plugins-ml-memory-meta]", "index": ".plugins-ml-memory-meta"},
        "status": 400,
    }


def test_a_parse_error_inside_our_wrapper_is_relayed_as_the_callers_own() -> None:
    cause = {"type": "parse_exception", "reason": "failed to find low and high distance values"}
    wrapped = {
        "error": {
            "root_cause": [cause],
            "type": "x_content_parse_exception",
            "reason": "[1:69] [bool] failed to parse field [must]",
            "caused_by": cause,
        },
        "status": 400,
    }
    assert public_error(wrapped, NAMES) == {"error": {"root_cause": [cause], **cause}, "status": 400}
    own = {"error": {"type": "x_content_parse_exception", "reason": "[1:9] [match] unknown token"}, "status": 400}
    assert public_error(own, NAMES) == own
