"""Hostile queries (issue 12, part B): pathological patterns, calendar edges and huge numbers.

Each is a request against the in-process server that must answer with the exact
status and the API's own error format, and leave the data as it was.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from memory_plugin.dsl.clauses import Fuzzy
from memory_plugin.dsl.mapping import TEXT
from memory_plugin.dsl.scoring import Corpus, Doc, OutOfTime

MEMORY = "/_plugins/_ml/memory"
HISTORIES = "/v2/ai/conversation_histories"
#: 13 stars, then a letter the name lacks: a backtracking matcher explores ~C(n, 12) ways to fail
#: on a name of n ``a``s (10 s at n = 30, hours at n = 40); RE2 answers in microseconds.
PATHOLOGICAL = "*a" * 12 + "*b"
#: The module that holds the evaluation budget (imported by path: ``dsl.execute`` is also its function).
evaluation = importlib.import_module("memory_plugin.dsl.execute")


async def create_memory(client, caller, name: str) -> str:
    response = await client.post(MEMORY, json={"name": name}, headers=caller.headers)
    assert response.status == 200, await response.text()
    return str((await response.json())["memory_id"])


async def search_memories(client, caller, body: Any) -> tuple[int, dict[str, Any]]:
    response = await client.post(f"{MEMORY}/_search", json=body, headers=caller.headers)
    return response.status, await response.json()


def assert_opensearch_error(body: dict[str, Any], status: int, error_type: str, reason: str) -> None:
    assert body["status"] == status, body
    assert body["error"]["type"] == error_type, body
    assert reason in body["error"]["reason"], body
    assert body["error"]["root_cause"][0]["type"] == error_type, body


async def memory_names(client, caller) -> list[str]:
    status, body = await search_memories(client, caller, {"query": {"match_all": {}}, "size": 100})
    assert status == 200, body
    return sorted(hit["_source"]["name"] for hit in body["hits"]["hits"])


# -- 1. a pattern that makes a backtracking matcher stall ------------------------------------------


@pytest.mark.timeout(120)  # not a speed assertion: a backtracking matcher would not answer today
async def test_pathological_wildcard_answers_exactly_without_backtracking(client, alice):
    await create_memory(client, alice, "a" * 40)
    await create_memory(client, alice, "a" * 30 + "b")
    status, body = await search_memories(client, alice, {"query": {"wildcard": {"name": PATHOLOGICAL}}})
    assert status == 200, body
    assert body["timed_out"] is False
    assert [hit["_source"]["name"] for hit in body["hits"]["hits"]] == ["a" * 30 + "b"]
    # The same pattern case-insensitively, and as a prefix: RE2 keeps Lucene's meaning.
    status, body = await search_memories(
        client, alice, {"query": {"wildcard": {"name": {"value": PATHOLOGICAL.upper(), "case_insensitive": True}}}}
    )
    assert status == 200 and body["hits"]["total"]["value"] == 1, body
    status, body = await search_memories(client, alice, {"query": {"prefix": {"name": "a" * 30}}})  # both
    assert status == 200 and body["hits"]["total"]["value"] == 2, body
    # Escaped characters are literals; name is analysed text, so patterns match its tokens.
    await create_memory(client, alice, "what? *really*")
    status, body = await search_memories(client, alice, {"query": {"wildcard": {"name": "re\\a*"}}})
    assert status == 200 and [h["_source"]["name"] for h in body["hits"]["hits"]] == ["what? *really*"], body
    assert await memory_names(client, alice) == sorted(["a" * 40, "a" * 30 + "b", "what? *really*"])


async def test_a_search_past_its_budget_answers_timed_out_like_opensearch(client, alice, monkeypatch):
    """Evaluation is bounded: past the budget the search stops and says ``timed_out`` (a 200, as OpenSearch)."""
    await create_memory(client, alice, "budget")
    monkeypatch.setattr(evaluation, "EVALUATION_BUDGET_SECONDS", 0.0)
    status, body = await search_memories(client, alice, {"query": {"wildcard": {"name": "*"}}})
    assert status == 200, body
    assert body["timed_out"] is True
    assert body["hits"]["hits"] == [] and body["hits"]["total"]["value"] == 0
    monkeypatch.setattr(evaluation, "EVALUATION_BUDGET_SECONDS", 2.0)
    status, body = await search_memories(client, alice, {"query": {"wildcard": {"name": "*"}}})
    assert status == 200 and body["timed_out"] is False and body["hits"]["total"]["value"] == 1, body


async def test_the_budget_covers_aggregations_highlighting_and_fuzzy_expansions(client, alice, monkeypatch):
    """Only matching was bounded: 2000 ``terms`` aggregations, 5000 highlight fields or 1024 ``fuzzy`` clauses over
    3000 memories took 20 s each in the evaluation threads (every other search queued behind them). Now what
    follows matching gets as long again, and a fuzzy query's expansions check the deadline too."""
    await create_memory(client, alice, "budget alpha")
    body = {
        "query": {"fuzzy": {"name": "alpah"}},
        "aggs": {f"a{i}": {"terms": {"field": "memory_id"}} for i in range(3)},
        "highlight": {"fields": {"name": {}}},
    }
    status, found = await search_memories(client, alice, body)
    assert status == 200 and found["timed_out"] is False, found
    assert set(found["aggregations"]) == {"a0", "a1", "a2"}
    assert found["hits"]["hits"][0]["highlight"] == {"name": ["budget <em>alpha</em>"]}
    monkeypatch.setattr(evaluation, "EVALUATION_BUDGET_SECONDS", 0.0)
    status, found = await search_memories(client, alice, body)
    assert status == 200 and found["timed_out"] is True, found
    assert "aggregations" not in found and found["hits"]["hits"] == []
    # A fuzzy clause's expansions are worked out once per search, over the whole vocabulary: bounded too.
    corpus = Corpus([Doc(str(i), {"name": f"word{i}"}, i) for i in range(300)])
    corpus.stats("name", TEXT)  # statistics gathered in time (the deadline is checked as they are)
    corpus.deadline = 0.0
    with pytest.raises(OutOfTime):
        Fuzzy("name", TEXT, "word", max_edits=2).expansions(corpus)
    monkeypatch.setattr(evaluation, "EVALUATION_BUDGET_SECONDS", 2.0)
    assert await memory_names(client, alice) == ["budget alpha"]


async def test_a_long_fuzzy_text_is_answered_within_the_budget(client, alice):
    """A match with fuzziness over 100k characters is 392 fuzzy clauses of 255-character words: each edit
    distance was a Python table (30 ms), and the query held both search threads for 12 s, answering
    ``timed_out`` with nothing while every other search waited."""
    await create_memory(client, alice, "a" * 5_000)
    body = {"query": {"match": {"name": {"query": "a" * 100_000, "fuzziness": "AUTO"}}}}
    status, found = await search_memories(client, alice, body)
    assert status == 200 and found["timed_out"] is False, str(found)[:300]
    assert [hit["_source"]["name"] for hit in found["hits"]["hits"]] == ["a" * 5_000]


async def test_a_pattern_too_large_for_re2_is_a_400(client, alice):
    await create_memory(client, alice, "kept")
    status, body = await search_memories(client, alice, {"query": {"wildcard": {"name": "?" * 200_000}}})
    assert status == 400, body
    assert_opensearch_error(body, 400, "parsing_exception", "[wildcard] query: the pattern is too large")
    assert await memory_names(client, alice) == ["kept"]


# -- 4. dates at the calendar's edges, numbers past any sense ------------------------------------


@pytest.mark.parametrize(
    ("bound", "reason"),
    [
        ("now+10000y", "failed to parse date field [now+10000y]: 'now+10000y' is outside years 0001-9999"),
        ("now-3000y", "is outside years 0001-9999"),
        ("now+999999999d", "is outside years 0001-9999"),
        ("9999-12-31T23:59:59-01:00", "is outside years 0001-9999 once in UTC"),
        ("0001-01-01T00:00:00+01:00", "is outside years 0001-9999 once in UTC"),
        ("2026-01-01T00:00:00+19:00", "failed to parse date field [2026-01-01T00:00:00+19:00]"),
        ("12026-01-01", "failed to parse date field [12026-01-01]"),
        ("now-1q", "failed to parse date field [now-1q]"),
    ],
)
async def test_range_dates_past_the_calendar_are_a_400(client, alice, bound, reason):
    await create_memory(client, alice, "kept")
    for op in ("gte", "lt"):
        status, body = await search_memories(client, alice, {"query": {"range": {"create_time": {op: bound}}}})
        assert status == 400, body
        assert_opensearch_error(body, 400, "parsing_exception", reason)
    assert await memory_names(client, alice) == ["kept"]


async def test_range_dates_at_the_calendar_edges_that_fit_still_work(client, alice):
    await create_memory(client, alice, "kept")
    for query in (
        {"range": {"create_time": {"lt": "9999-12-31T22:59:59-01:00", "gte": "0001-01-01T00:00:00-01:00"}}},
        {"range": {"create_time": {"gte": "now-2000y/d", "lte": "now+7000y"}}},
    ):
        status, body = await search_memories(client, alice, {"query": query})
        assert status == 200 and body["hits"]["total"]["value"] == 1, (query, body)


@pytest.mark.parametrize(
    "query",
    [
        {"bool": {"should": [{"match_all": {}}], "minimum_should_match": "9" * 5000}},
        {"bool": {"should": [{"match_all": {}}], "minimum_should_match": "-" + "9" * 50 + "%"}},
        {"bool": {"should": [{"match_all": {}}], "minimum_should_match": 10**20}},
        {"match": {"name": {"query": "kept", "minimum_should_match": "1" * 3000}}},
    ],
)
async def test_minimum_should_match_beyond_an_int_is_a_400(client, alice, query):
    await create_memory(client, alice, "kept")
    status, body = await search_memories(client, alice, {"query": query})
    assert status == 400, body
    assert_opensearch_error(body, 400, "parsing_exception", "invalid [minimum_should_match] value")
    assert await memory_names(client, alice) == ["kept"]


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"range": {"create_time": {"gte": 10**400}}}, "must be a finite number within a double's range"),
        ({"match_all": {"boost": 10**400}}, "[boost] must be a number"),
    ],
)
async def test_numbers_too_large_for_a_double_are_a_400(client, alice, query, reason):
    await create_memory(client, alice, "kept")
    status, body = await search_memories(client, alice, {"query": query})
    assert status == 400, body
    assert_opensearch_error(body, 400, "parsing_exception", reason)
    assert await memory_names(client, alice) == ["kept"]


def v2_record(record_id: str, created: str) -> dict[str, Any]:
    return {"record_id": record_id, "record_type": "voice", "text": f"call {record_id}", "record_created_at": created}


async def v2_search(client, caller, **params: str) -> tuple[int, dict[str, Any]]:
    query = {"q": "call", "record_type": "voice", "top_k": "100", **params}
    response = await client.get(HISTORIES, params=query, headers=caller.headers)
    return response.status, await response.json()


def assert_telnyx_error(body: dict[str, Any], parameter: str, detail: str) -> None:
    (error,) = body["errors"]
    assert error["code"] == "invalid_parameter", body
    assert error["source"]["parameter"] == parameter, body
    assert detail in error["detail"], body


@pytest.mark.parametrize(
    ("created", "detail"),
    [
        ("9999-12-31T23:59:59-01:00", "is outside years 0001-9999 once in UTC"),
        ("0001-01-01T00:00:00+01:00", "is outside years 0001-9999 once in UTC"),
        ("2026-01-01T00:00:00+18:01", "offset beyond ±18:00"),
        ("2026-01-01T00:00:00-23:00", "offset beyond ±18:00"),
        ("999-01-01T00:00:00Z", "is not an ISO 8601 date-time"),
        ("+12026-01-01T00:00:00Z", "is not an ISO 8601 date-time"),
        ("2026-02-30", "is not a valid date"),
    ],
)
async def test_v2_record_dates_past_the_calendar_are_a_400_and_nothing_is_written(client, admin, created, detail):
    response = await client.post(
        HISTORIES,
        json={"records": [v2_record("ok", "2026-01-01T00:00:00Z"), v2_record("bad", created)]},
        headers=admin.headers,
    )
    body = await response.json()
    assert response.status == 400, body
    assert_telnyx_error(body, "records[1].record_created_at", detail)
    status, found = await v2_search(client, admin)
    assert status == 200 and found["data"] == [], found


async def test_v2_dates_at_the_calendar_edges_are_kept_and_shown_with_four_digit_years(client, admin):
    records = [
        v2_record("first", "0001-01-01T00:00:00-01:00"),
        v2_record("year-999", "0999-06-01T12:00:00Z"),
        v2_record("last", "9999-12-31T23:59:59+01:00"),
    ]
    response = await client.post(HISTORIES, json={"records": records}, headers=admin.headers)
    assert response.status == 201, await response.text()
    status, found = await v2_search(client, admin)
    assert status == 200, found
    created = {hit["record_id"]: hit["record_created_at"] for hit in found["data"]}
    assert created == {
        "first": "0001-01-01T01:00:00.000000Z",
        "year-999": "0999-06-01T12:00:00.000000Z",
        "last": "9999-12-31T22:59:59.000000Z",
    }
    status, found = await v2_search(client, admin, **{"filter[record_created_at][lt]": "1000-01-01T00:00:00+18:00"})
    assert status == 200 and sorted(hit["record_id"] for hit in found["data"]) == ["first", "year-999"], found


@pytest.mark.parametrize(
    ("name", "value", "detail"),
    [
        ("filter[record_created_at][gte]", "9999-12-31T23:59:59-01:00", "is outside years 0001-9999"),
        ("filter[record_created_at][lt]", "0001-01-01T00:00:00+01:00", "is outside years 0001-9999"),
        ("filter[ingested_at][in]", "2026-01-01,0001-01-01T00:00:00+00:30", "is outside years 0001-9999"),
        ("filter[ingested_at]", "2026-01-01T00:00:00+99:00", "has an offset beyond ±18:00"),
        ("filter[record_created_at]", "2026-1-1", "is not an ISO 8601 date-time"),
    ],
)
async def test_v2_filter_dates_past_the_calendar_are_a_400(client, admin, name, value, detail):
    response = await client.post(HISTORIES, json={"records": [v2_record("kept", "2026-01-01")]}, headers=admin.headers)
    assert response.status == 201
    status, body = await v2_search(client, admin, **{name: value})
    assert status == 400, body
    assert_telnyx_error(body, name, detail)
    response = await client.delete(HISTORIES, params={name: value}, headers=admin.headers)
    assert response.status == 400
    assert_telnyx_error(await response.json(), name, detail)
    status, found = await v2_search(client, admin)
    assert [hit["record_id"] for hit in found["data"]] == ["kept"]


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("path", [f"{MEMORY}/_search", f"{MEMORY}/any-memory/_search"])
async def test_a_search_without_a_body_is_refused_as_the_real_node_refuses_it(client, alice, method, path):
    """``contentOrSourceParamParser``: no body and no ``source`` is a parse_exception, also when a
    ``q`` is sent (the real node checks the body before its parameters; issue 25)."""
    for params in ({}, {"q": "billing"}):
        response = await client.request(method, path, params=params, headers=alice.headers)
        assert response.status == 400
        assert_opensearch_error(
            await response.json(), 400, "parse_exception", "request body or source parameter is required"
        )
    with_source = await client.request(
        method,
        f"{MEMORY}/_search",
        params={"source": '{"query": {"match_all": {}}}', "source_content_type": "application/json"},
        headers=alice.headers,
    )
    assert with_source.status == 200


async def test_a_truncated_search_body_gets_jacksons_words(client, alice):
    response = await client.post(
        f"{MEMORY}/_search",
        data=b'{"query": {"match_all": {}}',
        headers={**alice.headers, "Content-Type": "application/json"},
    )
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "json_e_o_f_exception"
    assert error["reason"].startswith("Unexpected end-of-input: expected close marker for Object")
    assert error["reason"].endswith("line: 1, column: 28]")
