"""The search-DSL evaluator behind the 2.12+ ``_search`` memory endpoints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_plugin.dsl import (
    MESSAGE_INDEX,
    META_INDEX,
    QueryParsingError,
    execute,
    parse_search,
    search,
    search_response,
)
from memory_plugin.dsl.mapping import MESSAGE_FIELDS, META_FIELDS
from memory_plugin.errors import InvalidArgument, ParseFailure, QueryShardFailure, ShardParseFailure

DOCS: list[tuple[str, dict[str, Any]]] = [
    (
        "m1",
        {
            "memory_id": "conv-a",
            "create_time": "2024-01-01T10:00:00.5Z",
            "input": "What are the sort benchmarks?",
            "response": "The Sort Benchmarks are a series of benchmarks for sorting",
            "origin": "RAG Pipeline",
            "additional_info": {"source": "wiki", "lang": "en"},
            "trace_number": None,
        },
    ),
    (
        "m2",
        {
            "memory_id": "conv-a",
            "create_time": "2024-01-02T10:00:00.123456Z",
            "input": "Tell me about sorting algorithms",
            "response": "Quicksort is fast",
            "origin": "chat",
            "parent_message_id": "m1",
            "trace_number": 1,
        },
    ),
    (
        "m3",
        {
            "memory_id": "conv-b",
            "create_time": "2023-12-31T23:59:59Z",
            "input": "hello there",
            "response": "General Kenobi",
            "origin": "chat",
            "additional_info": {"source": "film"},
            "trace_number": 2,
        },
    ),
]


def ids(body: dict[str, Any] | None, docs: list[tuple[str, dict[str, Any]]] = DOCS) -> list[str]:
    return [h.id for h in execute(parse_search(body), docs).hits]


def reason(exc: pytest.ExceptionInfo[BaseException]) -> str:
    return str(exc.value.reason)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- clauses


def test_empty_body_and_match_all_return_everything_in_input_order() -> None:
    assert ids(None) == ["m1", "m2", "m3"]
    assert ids({}) == ["m1", "m2", "m3"]
    result = execute(parse_search({"query": {"match_all": {}}}), DOCS)
    assert result.total == 3
    assert all(h.score == 1.0 for h in result.hits)
    assert result.max_score == 1.0


def test_match_all_boost_and_match_none() -> None:
    result = execute(parse_search({"query": {"match_all": {"boost": 2}}}), DOCS)
    assert {h.score for h in result.hits} == {2.0}
    assert ids({"query": {"match_none": {}}}) == []


def test_match_or_is_case_insensitive_and_scores_by_coverage() -> None:
    body = {"query": {"match": {"input": "SORT benchmarks"}}}
    result = execute(parse_search(body), DOCS)
    assert [h.id for h in result.hits] == ["m1"]
    # "sorting" does not match the token "sort"; or-matching finds partial hits
    result = execute(parse_search({"query": {"match": {"response": "sorting fast"}}}), DOCS)
    assert [h.id for h in result.hits] == ["m1", "m2"] or [h.id for h in result.hits] == ["m2", "m1"]
    assert result.max_score == max(h.score or 0.0 for h in result.hits)


def test_match_ranks_fuller_coverage_first() -> None:
    docs = [("a", {"t": "red fish"}), ("b", {"t": "red blue fish"}), ("c", {"t": "green"})]
    result = execute(parse_search({"query": {"match": {"t": "blue fish"}}}), docs)
    assert [h.id for h in result.hits] == ["b", "a"]
    assert (result.hits[0].score or 0.0) > (result.hits[1].score or 0.0)


def test_match_operator_and_and_minimum_should_match() -> None:
    assert ids({"query": {"match": {"input": {"query": "sort benchmarks", "operator": "and"}}}}) == ["m1"]
    assert ids({"query": {"match": {"input": {"query": "sort nothing", "operator": "and"}}}}) == []
    assert ids({"query": {"match": {"input": {"query": "sort nothing", "minimum_should_match": 2}}}}) == []
    assert ids({"query": {"match": {"input": {"query": "sort nothing", "minimum_should_match": "50%"}}}}) == ["m1"]


def test_match_empty_query_matches_nothing_by_default() -> None:
    assert ids({"query": {"match": {"input": "?!"}}}) == []
    assert ids({"query": {"match": {"input": {"query": "?!", "zero_terms_query": "all"}}}}) == ["m1", "m2", "m3"]


def test_match_on_flat_object_root_and_dotted_path() -> None:
    assert ids({"query": {"match": {"additional_info": "wiki"}}}) == ["m1"]
    assert ids({"query": {"match": {"additional_info.source": "film"}}}) == ["m3"]


def test_match_on_number() -> None:
    assert ids({"query": {"match": {"trace_number": 2}}}) == ["m3"]


def test_match_phrase() -> None:
    assert ids({"query": {"match_phrase": {"response": "series of benchmarks"}}}) == ["m1"]
    assert ids({"query": {"match_phrase": {"response": "benchmarks of series"}}}) == []
    assert ids({"query": {"match_phrase": {"input": {"query": "HELLO there"}}}}) == ["m3"]


def test_term_exact_and_keyword_suffix() -> None:
    assert ids({"query": {"term": {"origin": "chat"}}}) == ["m2", "m3"]
    assert ids({"query": {"term": {"origin": "Chat"}}}) == []
    assert ids({"query": {"term": {"origin": {"value": "Chat", "case_insensitive": True}}}}) == ["m2", "m3"]
    assert ids({"query": {"term": {"origin.keyword": "RAG Pipeline"}}}) == ["m1"]
    assert ids({"query": {"term": {"memory_id": {"value": "conv-b"}}}}) == ["m3"]


def test_term_coerces_numbers_and_dates() -> None:
    assert ids({"query": {"term": {"trace_number": "1"}}}) == ["m2"]
    assert ids({"query": {"term": {"trace_number": 2.0}}}) == ["m3"]
    assert ids({"query": {"term": {"create_time": "2024-01-01T10:00:00.500Z"}}}) == ["m1"]
    assert ids({"query": {"term": {"_id": "m2"}}}) == ["m2"]


def test_terms() -> None:
    assert ids({"query": {"terms": {"memory_id": ["conv-b", "nope"]}}}) == ["m3"]
    assert ids({"query": {"terms": {"trace_number": [1, 2]}}}) == ["m2", "m3"]
    assert ids({"query": {"terms": {"memory_id": []}}}) == []


def test_range_numbers() -> None:
    assert ids({"query": {"range": {"trace_number": {"gte": 1}}}}) == ["m2", "m3"]
    assert ids({"query": {"range": {"trace_number": {"gt": 1, "lte": 2}}}}) == ["m3"]
    assert ids({"query": {"range": {"trace_number": {"lt": 1}}}}) == []


def test_range_dates_compare_as_instants() -> None:
    # "…00.5Z" vs "…00.123456Z" would sort wrongly as strings.
    body = {"query": {"range": {"create_time": {"gte": "2024-01-01T10:00:00.2Z", "lt": "2024-01-02"}}}}
    assert ids(body) == ["m1"]
    body = {"query": {"range": {"create_time": {"gt": "2024-01-01T00:59:59+01:00"}}}}
    assert ids(body) == ["m1", "m2"]  # m3 is exactly 2023-12-31T23:59:59Z
    body = {"query": {"range": {"create_time": {"gte": "2024-01-01T00:59:59+0100"}}}}
    assert ids(body) == ["m1", "m2", "m3"]
    # epoch millis against a date field
    ms = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert ids({"query": {"range": {"create_time": {"lt": ms}}}}) == ["m3"]
    assert (
        ids({"query": {"range": {"create_time": {"from": "2024-01-02T10:00:00.123456Z", "include_lower": False}}}})
        == []
    )


def test_range_now_date_math() -> None:
    recent = (datetime.now(UTC) - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    docs = [("new", {"t": recent}), ("old", {"t": "2001-01-01T00:00:00Z"})]
    assert ids({"query": {"range": {"t": {"gte": "now-1d"}}}}, docs) == ["new"]
    assert ids({"query": {"range": {"t": {"lt": "now-1y/d"}}}}, docs) == ["old"]


def test_range_strings_lexicographic() -> None:
    docs = [("a", {"n": "apple"}), ("b", {"n": "banana"}), ("c", {"n": "cherry"})]
    assert ids({"query": {"range": {"n": {"gt": "apple", "lte": "banana"}}}}, docs) == ["b"]


def test_exists() -> None:
    assert ids({"query": {"exists": {"field": "parent_message_id"}}}) == ["m2"]
    # null values do not exist
    assert ids({"query": {"exists": {"field": "trace_number"}}}) == ["m2", "m3"]
    assert ids({"query": {"exists": {"field": "additional_info.lang"}}}) == ["m1"]


def test_prefix_and_wildcard() -> None:
    assert ids({"query": {"prefix": {"memory_id": "conv-"}}}) == ["m1", "m2", "m3"]
    assert ids({"query": {"prefix": {"origin": {"value": "RAG"}}}}) == ["m1"]
    assert ids({"query": {"prefix": {"input": "kenob"}}}) == []
    assert ids({"query": {"prefix": {"response": "kenob"}}}) == ["m3"]  # token prefix
    assert ids({"query": {"wildcard": {"memory_id": "conv-?"}}}) == ["m1", "m2", "m3"]
    assert ids({"query": {"wildcard": {"origin": {"value": "rag*", "case_insensitive": True}}}}) == ["m1"]
    assert ids({"query": {"wildcard": {"origin": "ch*t"}}}) == ["m2", "m3"]


def test_ids() -> None:
    assert ids({"query": {"ids": {"values": ["m3", "m1", "zzz"]}}}) == ["m1", "m3"]


def test_bool_combinations() -> None:
    body: dict[str, Any] = {
        "query": {
            "bool": {
                "must": {"match": {"input": "sorting sort"}},
                "filter": [{"term": {"memory_id": "conv-a"}}],
                "must_not": [{"exists": {"field": "parent_message_id"}}],
            }
        }
    }
    assert ids(body) == ["m1"]
    body = {"query": {"bool": {"should": [{"term": {"origin": "chat"}}, {"term": {"memory_id": "conv-b"}}]}}}
    result = execute(parse_search(body), DOCS)
    assert [h.id for h in result.hits] == ["m3", "m2"]  # m3 matches both shoulds
    assert result.hits[0].score == 2.0 and result.hits[1].score == 1.0
    body = {
        "query": {
            "bool": {
                "should": [{"term": {"origin": "chat"}}, {"term": {"memory_id": "conv-b"}}],
                "minimum_should_match": 2,
            }
        }
    }
    assert ids(body) == ["m3"]
    # with a filter, should is optional (minimum_should_match defaults to 0)
    body = {"query": {"bool": {"filter": {"term": {"memory_id": "conv-a"}}, "should": {"term": {"origin": "chat"}}}}}
    assert ids(body) == ["m2", "m1"]


def test_bool_filter_only_scores_zero_like_opensearch() -> None:
    result = execute(parse_search({"query": {"bool": {"filter": {"term": {"origin": "chat"}}}}}), DOCS)
    assert [h.id for h in result.hits] == ["m2", "m3"]
    assert all(h.score == 0.0 for h in result.hits)


def test_empty_bool_and_constant_score() -> None:
    assert ids({"query": {"bool": {}}}) == ["m1", "m2", "m3"]
    result = execute(
        parse_search({"query": {"constant_score": {"filter": {"term": {"origin": "chat"}}, "boost": 3}}}), DOCS
    )
    assert [(h.id, h.score) for h in result.hits] == [("m2", 3.0), ("m3", 3.0)]


# --------------------------------------------------------------------------- sort and paging


def test_sort_forms() -> None:
    assert ids({"sort": "create_time"}) == ["m3", "m1", "m2"]
    assert ids({"sort": [{"create_time": "desc"}]}) == ["m2", "m1", "m3"]
    assert ids({"sort": [{"create_time": {"order": "asc"}}]}) == ["m3", "m1", "m2"]
    assert ids({"sort": [{"origin": "asc"}, {"create_time": {"order": "desc"}}]}) == ["m1", "m2", "m3"]
    assert ids({"sort": [{"_id": "desc"}]}) == ["m3", "m2", "m1"]


def test_sort_missing_values_last_by_default() -> None:
    assert ids({"sort": [{"trace_number": "desc"}]}) == ["m3", "m2", "m1"]
    assert ids({"sort": [{"trace_number": "asc"}]}) == ["m2", "m3", "m1"]
    assert ids({"sort": [{"trace_number": {"order": "asc", "missing": "_first"}}]}) == ["m1", "m2", "m3"]


def test_field_sort_nulls_scores_and_reports_sort_values() -> None:
    result = execute(parse_search({"sort": [{"create_time": "asc"}]}), DOCS)
    assert result.max_score is None
    assert all(h.score is None for h in result.hits)
    assert result.hits[0].sort == (int(datetime(2023, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp() * 1000),)
    result = execute(
        parse_search({"sort": ["_score", {"create_time": "asc"}], "query": {"term": {"origin": "chat"}}}), DOCS
    )
    assert [h.id for h in result.hits] == ["m3", "m2"]
    assert result.hits[0].score == 1.0


def test_default_sort_is_score_desc_then_input_order() -> None:
    docs = [("a", {"t": "x"}), ("b", {"t": "x y"}), ("c", {"t": "x"})]
    result = execute(
        parse_search({"query": {"bool": {"should": [{"match": {"t": "x"}}, {"match": {"t": "y"}}]}}}), docs
    )
    assert [h.id for h in result.hits][0] == "b"
    assert [h.id for h in result.hits][1:] == ["a", "c"]


def test_from_and_size() -> None:
    result = execute(parse_search({"from": 1, "size": 1, "sort": "create_time"}), DOCS)
    assert result.total == 3
    assert [h.id for h in result.hits] == ["m1"]
    assert ids({"from": 5}) == []
    assert ids({"size": 0}) == []
    assert ids({"size": "2"}) == ["m1", "m2"]
    q = parse_search({})
    assert (q.from_, q.size) == (0, 10)


def test_source_filtering() -> None:
    (hit,) = execute(parse_search({"_source": ["input", "additional_info.lang"], "size": 1}), DOCS).hits
    assert hit.source == {"input": "What are the sort benchmarks?", "additional_info": {"lang": "en"}}
    (hit,) = execute(parse_search({"_source": False, "size": 1}), DOCS).hits
    assert hit.source is None
    (hit,) = execute(parse_search({"_source": {"excludes": ["additional_info", "res*"]}, "size": 1}), DOCS).hits
    assert set(hit.source or {}) == {"memory_id", "create_time", "input", "origin", "trace_number"}
    (hit,) = execute(parse_search({"_source": "origin", "size": 1}), DOCS).hits
    assert hit.source == {"origin": "RAG Pipeline"}


def test_source_filtering_descends_into_arrays_of_objects() -> None:
    docs: list[tuple[str, dict[str, Any]]] = [("a", {"x": [{"k": "v1", "o": 1}, {"k": "v2"}], "n": "Foo"})]
    (hit,) = execute(parse_search({"_source": {"includes": ["x.k"]}}), docs).hits
    assert hit.source == {"x": [{"k": "v1"}, {"k": "v2"}]}
    assert ids({"query": {"term": {"x.k": "v2"}}}, docs) == ["a"]


def test_track_total_hits_is_accepted() -> None:
    assert ids({"track_total_hits": True}) == ["m1", "m2", "m3"]
    assert ids({"track_total_hits": 100}) == ["m1", "m2", "m3"]


# --------------------------------------------------------------------------- response


def test_search_response_shape() -> None:
    result = execute(parse_search({"query": {"term": {"origin": "chat"}}}), DOCS)
    body = search_response(result, 7, index=MESSAGE_INDEX, hit_extras=lambda i: {"_version": 1})
    assert body["took"] == 7
    assert body["timed_out"] is False
    assert body["_shards"] == {"total": 1, "successful": 1, "skipped": 0, "failed": 0}
    assert body["hits"]["total"] == {"value": 2, "relation": "eq"}
    assert body["hits"]["max_score"] == 1.0
    first = body["hits"]["hits"][0]
    assert list(first) == ["_index", "_id", "_version", "_score", "_source"]
    assert first["_index"] == ".plugins-ml-memory-message"
    assert first["_id"] == "m2"
    assert first["_source"]["input"] == "Tell me about sorting algorithms"


def test_search_response_with_sort_and_no_source() -> None:
    body = search({"sort": [{"create_time": "desc"}], "_source": False, "size": 1}, DOCS, index=META_INDEX)
    (hit,) = body["hits"]["hits"]
    assert hit["_index"] == ".plugins-ml-memory-meta"
    assert hit["_score"] is None and "_source" not in hit
    assert hit["sort"] == [1704189600123]  # epoch millis, truncated like a date long
    assert body["hits"]["max_score"] is None
    assert body["hits"]["total"]["value"] == 3


def test_empty_result() -> None:
    body = search({"query": {"term": {"origin": "none"}}}, [], index=META_INDEX)
    assert body["hits"] == {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []}


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": {"script": {"script": "1"}}}, "unsupported query [script]"),
        ({"query": {"frobnicate": {}}}, "unknown query [frobnicate]"),
        ({"query": {"bool": {"must": [{"more_like_this": {"like": "b"}}]}}}, "unsupported query [more_like_this]"),
        ({"query": {"bool": {"musts": []}}}, "[bool] query does not support [musts]"),
        (
            {"query": {"match": {"a": "x", "b": "y"}}},
            "[match] query doesn't support multiple fields, found [a] and [b]",
        ),
        ({"query": {"term": {"a": "x", "b": "y"}}}, "[term] query doesn't support multiple fields, found [a] and [b]"),
        ({"query": {"match": {"a": {"query": "x", "bogus": 1}}}}, "[match] query does not support [bogus]"),
        ({"query": {"match": {"a": {"operator": "and"}}}}, "[match] query malformed, no [query] specified"),
        ({"query": {"match": {"a": {"query": "x", "operator": "xor"}}}}, "[match] query: unknown operator [xor]"),
        ({"query": {"term": {"a": {"value": [1]}}}}, "[term] query does not support value of type [START_ARRAY]"),
        ({"query": {"terms": {"a": "x"}}}, "[terms] query does not support [a]"),
        ({"query": {"range": {"a": {"gte": 1, "gtx": 2}}}}, "[range] query does not support [gtx]"),
        ({"query": {"range": {"a": {"gte": "now-1q"}}}}, "failed to parse date field [now-1q]"),
        ({"query": {"exists": {}}}, "[exists] must be provided with a [field]"),
        ({"query": {"ids": {"values": "m1"}}}, "[ids] query malformed, [values] must be an array"),
        (
            {"query": {"match_all": {}, "term": {"a": 1}}},
            "[match_all] malformed query, expected [END_OBJECT] but found [FIELD_NAME]",
        ),
        ({"query": {}}, "query malformed, empty clause found"),
        ({"query": "match_all"}, "[_na] query malformed, must start with start_object, found [VALUE_STRING]"),
        ({"aggs": {"s": {"stats": {"field": "a"}}}}, "aggregation [stats] is not supported here"),
        ({"version": "yes"}, "[version] must be a boolean, found [yes]"),
        ({"query": {"query_string": {"query": "(" * 40 + "x"}}}, "query string is nested too deeply"),
        ({"sort": [{"a": "up"}]}, "[a] sort order [up] must be one of [asc, desc]"),
        ({"sort": [{"a": {"order": "asc", "bogus": 1}}]}, "[field_sort] unknown field [bogus]"),
        ({"sort": [1]}, "malformed sort format, within the sort array, an object, or an actual string are allowed"),
        ({"size": "ten"}, "[size] must be an integer, found [ten]"),
        ({"from": True}, "[from] must be an integer, found [VALUE_BOOLEAN]"),
        ({"_source": {"fields": ["a"]}}, "Unknown key for a START_ARRAY in [fields]."),
        ({"_source": 5}, "Unknown key for a VALUE_NUMBER in [_source]."),
    ],
)
def test_parse_errors_name_the_culprit(body: Any, message: str) -> None:
    with pytest.raises(QueryParsingError) as exc:
        parse_search(body)
    assert reason(exc) == message
    assert exc.value.type == "parsing_exception"  # type: ignore[attr-defined]
    assert exc.value.status == 400  # type: ignore[attr-defined]


def test_parsing_error_is_an_invalid_argument() -> None:
    assert issubclass(QueryParsingError, InvalidArgument)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"size": -1}, "[size] parameter cannot be negative, found [-1]"),
        ({"from": -3}, "[from] parameter cannot be negative, found [-3]"),
        (
            {"size": 10001},
            "Result window is too large, size must be less than or equal to: [10000] but was [10001].",
        ),
        (
            {"from": 9995, "size": 10},
            "Result window is too large, from + size must be less than or equal to: [10000] but was [10005]. "
            "See the scroll api for a more efficient way to request large data sets. This limit can be set by "
            "changing the [index.max_result_window] index level setting.",
        ),
    ],
)
def test_paging_errors(body: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument) as exc:
        parse_search(body)
    assert reason(exc) == message
    assert exc.value.type == "illegal_argument_exception"  # type: ignore[attr-defined]


def test_size_limit_is_configurable() -> None:
    parse_search({"size": 50}, max_size=50)
    with pytest.raises(InvalidArgument):
        parse_search({"size": 51}, max_size=50)
    parse_search({"from": 9990, "size": 10})


def test_non_object_body_is_a_parse_failure() -> None:
    with pytest.raises(ParseFailure) as exc:
        parse_search(["match_all"])  # type: ignore[arg-type]
    assert exc.value.type == "parse_exception"  # type: ignore[attr-defined]


def test_unknown_top_level_key_names_the_parameter() -> None:
    with pytest.raises(QueryParsingError) as exc:
        parse_search({"suggest": {"s": {}}})
    assert exc.value.parameter == "suggest"  # type: ignore[attr-defined]


def test_errors_are_raised_before_any_evaluation() -> None:
    # the bad clause sits in a branch that would never be evaluated
    body = {"query": {"bool": {"must_not": {"match_none": {}}, "should": [{"match_all": {}}, {"script": {"a": "b"}}]}}}
    with pytest.raises(QueryParsingError, match=r"unsupported query \[script\]"):
        parse_search(body)


@pytest.mark.parametrize("key", ["²", "٥", "1" * 30, True, "abc", "now-1d"])
def test_a_date_search_after_key_that_the_shard_cannot_read_is_its_parse_exception(key):
    body = {"query": {"match_all": {}}, "sort": [{"create_time": "asc"}], "search_after": [key]}
    with pytest.raises(ShardParseFailure):
        parse_search(body, fields=META_FIELDS)


@pytest.mark.parametrize(("key", "read"), [("1700000000000", 1700000000000), ("-5", -5), (17, 17)])
def test_epoch_millis_digits_as_a_date_search_after_key_compare_as_dates(key, read):
    body = {"query": {"match_all": {}}, "sort": [{"create_time": "asc"}], "search_after": [key]}
    assert parse_search(body, fields=META_FIELDS).search_after == (read,)


@pytest.mark.parametrize(
    ("sort", "after", "expected"),
    [
        ([{"_id": "asc"}], ["m1"], ["m2", "m3"]),
        ([{"_id": "desc"}], ["m3"], ["m2", "m1"]),
        ([{"_id": "asc"}], [12], ["m1", "m2", "m3"]),  # read as the text "12", before "m1"
        ([{"_score": "desc"}, {"_id": "asc"}], [1.0, "m2"], ["m3"]),
        ([{"_score": "desc"}, {"_id": "asc"}], [1.0, 7], ["m1", "m2", "m3"]),
    ],
)
def test_search_after_on_id_pages_by_the_ids_text(sort, after, expected):
    """The next page after an ``_id`` sort value (a 500 before: the key compared a string with a tuple)."""
    assert ids({"query": {"match_all": {}}, "sort": sort, "search_after": after}) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("create_time:[2024-01-01T00:00:00Z TO *]", ["m1", "m2"]),
        ("create_time:[* TO 2024-01-01T10:00:00.5Z]", ["m1", "m3"]),
        ("create_time:{* TO 2024-01-01T10:00:00.5Z}", ["m3"]),
        ("create_time:[1577836800000 TO 1893456000000}", ["m1", "m2", "m3"]),
        ("create_time:>=1704153600000", ["m2"]),
        ("create_time:>2024-01-01T00\\:00\\:00Z", ["m1", "m2"]),
        # a bound the field's format (strict_date_time||epoch_millis) does not read matches nothing, as on the node
        ("create_time:[2024-01-01 TO *]", []),
        ("create_time:<2024-01-01", []),
        ("trace_number:[1 TO 2]", ["m2", "m3"]),
        ("trace_number:>1 AND origin:chat", ["m3"]),
        ("create_time:>now-1000y", ["m1", "m2", "m3"]),
    ],
)
def test_query_string_ranges_select_as_a_range_query_does(text, expected):
    """Lucene's range syntax in ``query_string`` (it matched nothing before, silently), on the message index's
    fields (``create_time`` a date in ``strict_date_time||epoch_millis``)."""
    query = parse_search({"query": {"query_string": {"query": text}}}, fields=MESSAGE_FIELDS)
    assert sorted(hit.id for hit in execute(query, DOCS).hits) == expected


@pytest.mark.parametrize(
    "text",
    [
        "input:(sort OR hello",
        "input:sort)",
        "create_time:[2024-01-01 TO",
        "create_time:[2024 2025]",
        "create_time:>2024-01-01T00:00:00Z",  # the term after ">" holds an unescaped ":"
    ],
)
def test_a_query_string_lucene_cannot_parse_is_the_shards_400(text):
    with pytest.raises(InvalidArgument) as refused:
        ids({"query": {"query_string": {"query": text}}})
    assert reason(refused) == f"Failed to parse query [{text}]"
    assert ids({"query": {"simple_query_string": {"query": text}}}) is not None  # never fails


def test_min_score_leaves_out_the_hits_scoring_less_and_counts_only_the_rest():
    body: dict[str, Any] = {"query": {"match": {"input": "sort sorting benchmarks"}}}
    scored = execute(parse_search(body), DOCS)
    scores = sorted(hit.score for hit in scored.hits)
    assert len(scores) == 2 and scores[0] < scores[1]
    kept = execute(parse_search({**body, "min_score": (scores[0] + scores[1]) / 2}), DOCS)
    assert [hit.score for hit in kept.hits] == [scores[1]] and kept.total == 1
    assert execute(parse_search({**body, "min_score": str(scores[0])}), DOCS).total == 2  # text that reads as a number
    for bad in ("high", [1], {"x": 1}, True):
        with pytest.raises(InvalidArgument) as refused:
            parse_search({**body, "min_score": bad})
        assert reason(refused).startswith("[min_score] must be a number")


# --------------------------------------------------------------------------- integer options, as the node reads them


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        # Lucene's FuzzyQuery refuses them when the shard builds it: query_shard_exception
        ({"fuzzy": {"input": {"value": "sort", "max_expansions": 0}}}, QueryShardFailure, "maxExpansions must be"),
        ({"fuzzy": {"input": {"value": "sort", "max_expansions": "-1"}}}, QueryShardFailure, "maxExpansions must be"),
        ({"fuzzy": {"input": {"value": "sort", "prefix_length": -1}}}, QueryShardFailure, "prefixLength cannot be"),
        # the builders refuse them as they parse: illegal_argument_exception, in their setters' order
        ({"match": {"input": {"query": "sort", "max_expansions": 0}}}, InvalidArgument, "[match] requires maxExp"),
        (
            {"match": {"input": {"query": "sort", "max_expansions": 0, "prefix_length": -1}}},
            InvalidArgument,
            "[match] requires prefix length",
        ),
        ({"match_phrase": {"input": {"query": "sort", "slop": -2}}}, InvalidArgument, "No negative slop allowed."),
        (
            {"multi_match": {"query": "sort", "fields": ["input"], "max_expansions": 0, "prefix_length": -1}},
            InvalidArgument,
            "Max expansions must be strictly great than zero.",
        ),
        # not an integer at all: a parsing error naming the option (no 500 for 5000 digits, no Arabic-Indic digit)
        ({"fuzzy": {"input": {"value": "sort", "max_expansions": "9" * 5000}}}, QueryParsingError, "[max_expansions]"),
        ({"match": {"input": {"query": "sort", "prefix_length": "٥"}}}, QueryParsingError, "[prefix_length]"),
        ({"match_phrase": {"input": {"query": "sort", "slop": 1.5}}}, QueryParsingError, "[slop]"),
    ],
)
def test_integer_options_out_of_range_are_refused_as_the_node_refuses_them(
    query: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as exc:
        execute(parse_search({"query": query}), DOCS)
    assert type(exc.value) is error
    assert message in reason(exc), reason(exc)


def test_integer_options_in_range_and_on_an_unmapped_field_are_taken() -> None:
    assert ids({"query": {"fuzzy": {"input": {"value": "sprt", "max_expansions": "+1", "prefix_length": 1}}}}) == ["m1"]
    assert ids({"query": {"match": {"input": {"query": "sprt", "fuzziness": 1, "max_expansions": 99_999_999_999}}}})
    # the shard builds no fuzzy query for a field it does not map: nothing to refuse, nothing found
    unmapped = parse_search(
        {"query": {"fuzzy": {"no_such_field": {"value": "x", "max_expansions": 0}}}}, fields=MESSAGE_FIELDS
    )
    assert not execute(unmapped, DOCS).hits


def test_query_string_fuzzy_options_shape_and_refuse_its_fuzzy_terms() -> None:
    def body(query: str, **options: Any) -> dict[str, Any]:
        return {"query": {"query_string": {"query": query, "default_field": "input", **options}}}

    assert ids(body("sprt~1")) == ["m1"]
    assert ids(body("sprt~1", fuzzy_prefix_length=2)) == []  # "sp" is not the prefix of "sort"
    for options, message in (
        ({"fuzzy_max_expansions": 0}, "maxExpansions must be positive."),
        ({"fuzzy_prefix_length": -1}, "prefixLength cannot be negative."),
    ):
        with pytest.raises(QueryShardFailure) as exc:
            execute(parse_search(body("sprt~1", **options)), DOCS)
        assert message in reason(exc)
        assert ids(body("sort", **options)) == ["m1"]  # no fuzzy term: no FuzzyQuery to refuse
    with pytest.raises(QueryParsingError, match="fuzzy_max_expansions"):
        parse_search(body("sort", fuzzy_max_expansions="many"))


@pytest.mark.parametrize("bounds", ["9" * 5000 + ",6", "٣,6", "3,"])
def test_auto_fuzziness_bounds_that_are_no_int_are_a_parse_error(bounds: str) -> None:
    body = {"query": {"match": {"input": {"query": "sort", "fuzziness": f"AUTO:{bounds}"}}}}
    with pytest.raises(ParseFailure, match="failed to find low and high distance values"):
        execute(parse_search(body), DOCS)
