"""The conformance scenarios: what a client of the memory API sends, in order.

Each scenario is an async function over a :class:`Differ`; it sends the same
requests to the real node and to us and lets the differ keep score.  Ids are
written as ``<id:n>``: the n-th id the server handed out in this scenario.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tests.conformance.differ import Differ

M = "/_plugins/_ml/memory"

Scenario = Callable[[Differ], Awaitable[None]]

EVERY_JSON_TYPE = {"s": "text", "i": 7, "f": 1.5, "t": True, "n": None, "o": {"x": 1}, "a": [1, "two"]}


async def create_get_list(d: Differ) -> None:
    await d.send("POST", M, {"name": "first", "application_type": "chatbot", "additional_info": {"k": "v"}})
    await d.send("POST", M)
    await d.send("POST", M, {})
    await d.send("POST", M, {"name": "typed", "additional_info": EVERY_JSON_TYPE})
    for i in range(4):
        await d.send("GET", f"{M}/<id:{i}>")
    for size in (1, 2, 3, 10):
        await d.send("GET", f"{M}?max_results={size}")
        await d.send("GET", f"{M}?max_results={size}&next_token={size}")
    await d.send("GET", M)
    await d.send("GET", f"{M}?next_token=2")


async def messages_and_traces(d: Differ) -> None:
    await d.send("POST", M, {"name": "chat"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "hello", "response": "hi", "origin": "o"})
    await d.send(
        "POST",
        f"{M}/<id:0>/messages",
        {"input": "q", "prompt_template": "p", "response": "r", "origin": "o", "additional_info": {"k": "v"}},
    )
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "only input"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": 1, "response": True, "origin": 2.5})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "x", "additional_info": EVERY_JSON_TYPE})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "t1", "parent_message_id": "<id:1>", "trace_number": 1})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "t2", "parent_message_id": "<id:1>", "trace_number": 2})
    await d.send("GET", f"{M}/<id:0>/messages")
    await d.send("GET", f"{M}/<id:0>/messages?max_results=2")
    await d.send("GET", f"{M}/<id:0>/messages?max_results=2&next_token=2")
    await d.send("GET", f"{M}/message/<id:1>")
    await d.send("GET", f"{M}/message/<id:5>")
    await d.send("GET", f"{M}/message/<id:1>/traces")
    await d.send("GET", f"{M}/message/<id:1>/traces?max_results=1")
    await d.send("GET", f"{M}/message/<id:2>/traces")


async def updates(d: Differ) -> None:
    await d.send("POST", M, {"name": "before", "additional_info": {"a": "1"}})
    await d.send("PUT", f"{M}/<id:0>", {"name": "after"})
    await d.send("PUT", f"{M}/<id:0>", {"additional_info": {"b": "2"}})
    await d.send("PUT", f"{M}/<id:0>", {"name": "after"})
    await d.send("PUT", f"{M}/<id:0>", {})
    await d.send("PUT", f"{M}/<id:0>", {"name": "x", "unknown": 1})
    await d.send("GET", f"{M}/<id:0>")
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "in", "response": "out"})
    await d.send("PUT", f"{M}/message/<id:1>", {"additional_info": {"c": "3"}})
    await d.send("PUT", f"{M}/message/<id:1>", {"input": "changed"})
    await d.send("PUT", f"{M}/message/<id:1>", {})
    await d.send("GET", f"{M}/message/<id:1>")
    for body in ({"additional_info": 5}, {"response": {"a": 1}}, {"response": 5}, {"response": None}):
        await d.send("PUT", f"{M}/message/<id:1>", body)
        await d.send("PUT", f"{M}/message/nope", body)
    await d.send("GET", f"{M}/message/<id:1>")
    await d.send("PUT", f"{M}/nope", {"name": "x"})
    await d.send("PUT", f"{M}/nope", {"name": 5})
    await d.send("PUT", f"{M}/message/nope", {"input": "x"})


async def deletes(d: Differ) -> None:
    await d.send("POST", M, {"name": "doomed"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "in", "response": "out"})
    await d.send("DELETE", f"{M}/<id:0>")
    await d.send("GET", f"{M}/<id:0>")
    await d.send("GET", f"{M}/<id:0>/messages")
    await d.send("GET", f"{M}/message/<id:1>")
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "late"})
    await d.send("PUT", f"{M}/<id:0>", {"name": "late"})
    await d.send("DELETE", f"{M}/<id:0>")
    await d.send("DELETE", f"{M}/never-existed")


async def bad_input(d: Differ) -> None:
    await d.send("POST", M, {"name": "target"})
    for value in ("abc", "0", "-1", "1.5", "99999999999", "", "10001"):
        await d.send("GET", f"{M}?max_results={value}")
        await d.send("GET", f"{M}?next_token={value}")
    await d.send("GET", f"{M}?bogus=1")
    await d.send("POST", M, raw="{bad json")
    await d.send("POST", M, raw="[]")
    await d.send("POST", M, raw='{"name": ')
    await d.send("POST", M, raw="name=x", content_type="application/x-www-form-urlencoded")
    await d.send("POST", M, {"name": 5})
    await d.send("POST", M, {"name": None})
    await d.send("POST", M, {"additional_info": "text"})
    await d.send("PATCH", M, {})
    await d.send("DELETE", M)
    await d.send("GET", f"{M}/<id:0>/nothing")
    await d.send("GET", f"{M}/doesnotexist")
    await d.send("POST", f"{M}/<id:0>/messages", {})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": None})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": ["a"]})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": {"a": 1}})
    await d.send("POST", f"{M}/doesnotexist/messages", {"input": "x"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "in", "response": "out"})
    for body in (
        {"additional_info": "x"},
        {"additional_info": [1]},
        {"additional_info": True},
        {"name": {"a": 1}},
        {"name": 5},
        {"name": ["x"]},
        {"name": None},
    ):
        await d.send("PUT", f"{M}/<id:0>", body)
    await d.send("GET", f"{M}/<id:0>")
    await d.send("GET", M)


async def paging_errors(d: Differ) -> None:
    await d.send("POST", M, {"name": "pages"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "in"})
    for query in (
        "max_results=0",
        "max_results=-2",
        "next_token=-1",
        "max_results=10000",
        "next_token=9999",
        "next_token=9991",
        "max_results=abc",
        "max_results=%D9%A5",
        "max_results=%2B3",
        "max_results=+3",
    ):
        await d.send("GET", f"{M}/<id:0>/messages?{query}")
        await d.send("GET", f"{M}/message/<id:1>/traces?{query}")
        await d.send("GET", f"{M}?{query}")


async def parameters(d: Differ) -> None:
    await d.send("POST", M, {"name": "params"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "in"})
    for query in (
        "max_result=1",
        "pretyy=1",
        "next_tokn=1&max_reslts=2",
        "memory=1",
        "filter_paths=x",
        "humn=1",
        "source=%7B%7D",
        "error_trac=1",
        "memory_id=1",
        "pretty&human&error_trace=false",
    ):
        await d.send("GET", f"{M}?{query}")
    await d.send("GET", f"{M}/<id:0>?memry_id=1")
    await d.send("GET", f"{M}/<id:0>/messages?memry_id=1&max_reslts=2")
    await d.send("GET", f"{M}/message/<id:1>?mesage_id=1")
    await d.send("PUT", f"{M}/<id:0>?refresh=true", {"name": "x"})
    await d.send("POST", f"{M}?max_results=1", {"name": "x"})


async def content_types(d: Differ) -> None:
    await d.send("POST", M, {"name": "ct"})
    for content_type in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "",
        "application/x-ndjson",
        "application/json; charset=UTF-8",
        "application/vnd.opensearch+json;compatible-with=7",
        "multipart/form-data; boundary=x",
        "application/xml",
    ):
        await d.send("POST", M, raw='{"name": "typed"}', content_type=content_type)
        await d.send("PUT", f"{M}/<id:0>", raw='{"name": "typed"}', content_type=content_type)
        await d.send("POST", f"{M}/<id:0>/messages", raw='{"input": "typed"}', content_type=content_type)


async def filter_path(d: Differ) -> None:
    await d.send("POST", M, {"name": "fp", "additional_info": {"k": "v"}})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "in", "response": "out"})
    for fp in ("memories.memory_id", "memories.name,next_token", "-memories.create_time", "*.name", "nothing"):
        await d.send("GET", f"{M}?filter_path={fp}")
    await d.send("GET", f"{M}/<id:0>?filter_path=name")
    await d.send("GET", f"{M}/<id:0>/messages?filter_path=messages.input")
    await d.send("POST", f"{M}?filter_path=memory_id", {"name": "x"})
    await d.send("PUT", f"{M}/<id:0>?filter_path=result", {"name": "y"})


async def filtered_searches(d: Differ) -> None:
    """2.12+ ``_search`` bodies whose answers do not depend on what else the index holds.

    Scores here are constant (filters, ``constant_score``, field sorts): BM25 scores
    depend on every document of the index, and ours holds other callers' memories.
    """
    for n, (name, app) in enumerate((("alpha router", "a"), ("beta router", "b"), ("gamma switch", "c"))):
        await d.send("POST", M, {"name": name, "application_type": app, "additional_info": {"n": str(n)}})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "why blink", "response": "reset it", "origin": "x"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "t", "parent_message_id": "<id:3>", "trace_number": 1})
    by_app = [{"application_type": "asc"}]
    for body in (
        {"query": {"term": {"name": "router"}}, "sort": by_app},
        {"query": {"constant_score": {"filter": {"match": {"name": "router"}}}}, "sort": by_app},
        {"query": {"bool": {"filter": [{"term": {"application_type": "b"}}]}}},
        {"query": {"constant_score": {"filter": {"prefix": {"name": "gam"}}, "boost": 2}}},
        {"query": {"match_all": {}}, "sort": [{"application_type": "desc"}], "from": 1, "size": 1},
        {"query": {"match_all": {}}, "sort": by_app, "_source": ["name", "additional_info.*"]},
        {"query": {"match_all": {}}, "sort": by_app, "_source": {"excludes": ["*_time"]}},
        {"query": {"match_all": {}}, "sort": by_app, "_source": False},
        {"query": {"match_all": {}}, "sort": by_app, "search_after": ["a"]},
        {"query": {"match_all": {}}, "sort": by_app, "post_filter": {"term": {"application_type": "c"}}},
        {"query": {"match_all": {}}, "size": 0, "aggs": {"apps": {"terms": {"field": "application_type"}}}},
        {"query": {"match_all": {}}, "size": 0, "track_total_hits": False},
        {"query": {"range": {"create_time": {"gte": "now-1h", "lte": "now+1h"}}}, "sort": by_app, "size": 2},
        {"query": {"term": {"name.keyword": "alpha router"}}},
        {"query": {"match_all": {}}, "size": 10001},
    ):
        await d.send("POST", f"{M}/_search", body)
    for body in (
        {"query": {"bool": {"filter": [{"term": {"input": "blink"}}]}}, "sort": [{"trace_number": "asc"}]},
        {"query": {"exists": {"field": "trace_number"}}, "sort": [{"trace_number": "asc"}]},
        {"query": {"match_all": {}}, "sort": [{"trace_number": {"order": "desc", "missing": "_last"}}]},
        {"query": {"match_all": {}}, "size": 0, "aggs": {"origins": {"terms": {"field": "origin"}}}},
    ):
        await d.send("POST", f"{M}/<id:0>/_search", body)
        await d.send("POST", f"{M}/<id:1>/_search", body)
    await d.send("POST", f"{M}/doesnotexist/_search", {"query": {"match_all": {}}})


#: Memory names chosen for the analyzer and BM25: repeated terms, apostrophes, numbers, accents, CJK, emoji.
SEARCH_NAMES = (
    ("Weather chat about the weather", "chatbot"),
    ("Travel plans for Paris", "agent"),
    ("weather report", "chatbot"),
    ("Hello World", None),
    ("Café résumé naïve CAFÉ", None),
    ("東京 travel 日本 😀", "agent"),
    ("Don't panic: it's 3.14 o'clock at example.com", "chatbot"),
    ("The quick brown fox jumps over the lazy dog near Paris weather station", None),
)

SEARCH_MESSAGES = (
    {"input": "What is the weather in Paris?", "response": "Sunny and warm in Paris today", "origin": "web"},
    {"input": "Book a flight to Tokyo", "response": "Flights to Tokyo are booked", "origin": "app"},
    {"input": "weather weather weather", "response": "Please ask one question", "origin": "web"},
    {"input": "Tell me a joke", "response": "Why did the chicken cross the road?", "prompt_template": "joke {x}"},
    {"input": "Translate 東京", "response": "Tokyo", "origin": "app", "additional_info": {"lang": "ja"}},
)

MEMORY_QUERIES: tuple[dict[str, object], ...] = (
    {"query": {"match": {"name": "weather"}}},
    {"query": {"match": {"name": "weather paris"}}},
    {"query": {"match": {"name": {"query": "weather paris", "operator": "and"}}}},
    {"query": {"match": {"name": {"query": "weather paris travel", "minimum_should_match": 2}}}},
    {"query": {"match": {"name": "CAFÉ"}}},
    {"query": {"match": {"name": "don't 3.14"}}},
    {"query": {"match": {"name": "東京"}}},
    {"query": {"match": {"name": "😀"}}},
    {"query": {"match": {"name": {"query": "the", "boost": 2.5}}}},
    {"query": {"term": {"name": "weather"}}},
    {"query": {"term": {"name": "Weather"}}},
    {"query": {"term": {"name": "weather report"}}},
    {"query": {"term": {"application_type": "chatbot"}}},
    {"query": {"terms": {"application_type": ["chatbot", "agent"]}}},
    {"query": {"match": {"application_type": "chatbot"}}},
    {"query": {"match_phrase": {"name": "the weather"}}},
    {"query": {"match_phrase": {"name": "weather chat"}}},
    {"query": {"match_phrase": {"name": {"query": "chat weather", "slop": 2}}}},
    {"query": {"prefix": {"name": "wea"}}},
    {"query": {"wildcard": {"name": "p*s"}}},
    {"query": {"exists": {"field": "application_type"}}},
    {
        "query": {
            "bool": {"must": [{"match": {"name": "weather"}}], "filter": [{"term": {"application_type": "chatbot"}}]}
        }
    },
    {"query": {"bool": {"should": [{"match": {"name": "paris"}}, {"match": {"name": "weather"}}]}}},
    {"query": {"bool": {"must_not": [{"match": {"name": "weather"}}]}}},
    {
        "query": {
            "bool": {
                "should": [{"term": {"application_type": "agent"}}, {"match": {"name": "report"}}],
                "minimum_should_match": 1,
            }
        }
    },
    {"query": {"constant_score": {"filter": {"match": {"name": "weather"}}, "boost": 3}}},
    {"query": {"match": {"name": "weather"}}, "size": 0},
    {"query": {"match": {"name": "weather"}}, "from": 1, "size": 1},
    {"query": {"match": {"name": "weather"}}, "_source": ["name"]},
    {"query": {"match": {"name": "weather"}}, "_source": False},
    {"query": {"match": {"name": "weather"}}, "track_total_hits": True},
    {"query": {"match_all": {}}, "sort": [{"create_time": "asc"}]},
    {"query": {"match": {"name": "weather"}}, "sort": ["_score", {"create_time": "desc"}]},
    {"query": {"multi_match": {"query": "weather chatbot", "fields": ["name", "application_type"]}}},
    {"query": {"multi_match": {"query": "weather paris", "fields": ["name^2"], "type": "most_fields"}}},
    {"query": {"multi_match": {"query": "the weather", "fields": ["name"], "type": "phrase"}}},
    {"query": {"simple_query_string": {"query": "weather +paris", "fields": ["name"]}}},
    {"query": {"simple_query_string": {"query": '"weather report" | hello'}}},
    {"query": {"query_string": {"query": "name:weather AND application_type:chatbot"}}},
    {"query": {"query_string": {"query": "weath* OR paris", "default_field": "name"}}},
    {"query": {"fuzzy": {"name": "wether"}}},
    {"query": {"fuzzy": {"name": {"value": "pariss", "fuzziness": 1}}}},
    {"query": {"fuzzy": {"name": {"value": "wether", "max_expansions": 0}}}},
    {"query": {"fuzzy": {"name": {"value": "wether", "max_expansions": -1}}}},
    {"query": {"match": {"name": {"query": "wether repot", "fuzziness": "AUTO", "max_expansions": 0}}}},
    {"query": {"match": {"name": {"query": "wether", "max_expansions": -3}}}},
    {"query": {"multi_match": {"query": "wether", "fields": ["name"], "max_expansions": 0}}},
    {"query": {"fuzzy": {"name": {"value": "wether", "prefix_length": -1}}}},
    {"query": {"match": {"name": {"query": "wether", "fuzziness": 1, "prefix_length": -1}}}},
    {"query": {"fuzzy": {"no_such_field": {"value": "wether", "max_expansions": 0}}}},
    {"query": {"multi_match": {"query": "wether", "fields": ["name"], "prefix_length": -1}}},
    {"query": {"multi_match": {"query": "wether", "fields": ["name"], "type": "phrase", "slop": -1}}},
    {"query": {"match_phrase": {"name": {"query": "the weather", "slop": -1}}}},
    {"query": {"multi_match": {"query": "wether", "fields": ["name"], "prefix_length": -1, "max_expansions": 0}}},
    {"query": {"query_string": {"query": "wether~", "default_field": "name", "fuzzy_max_expansions": 0}}},
    {"query": {"query_string": {"query": "wether~", "default_field": "name", "fuzzy_prefix_length": -1}}},
    {"query": {"simple_query_string": {"query": "wether~", "fields": ["name"], "fuzzy_max_expansions": 0}}},
    {"query": {"match": {"name": {"query": "wether repot", "fuzziness": "AUTO"}}}},
    {"query": {"match_all": {}}, "sort": [{"application_type": "asc"}], "search_after": ["agent"], "size": 2},
    {
        "query": {"match": {"name": "weather"}},
        "sort": ["_score", {"application_type": "asc"}],
        "search_after": [1.3, "a"],
    },
    {"query": {"match": {"name": "weather"}}, "highlight": {"fields": {"name": {}}}},
    {"query": {"match_all": {}}, "size": 0, "aggs": {"types": {"terms": {"field": "application_type"}}}},
    {"query": {"match_all": {}}, "size": 0, "aggs": {"n": {"value_count": {"field": "application_type"}}}},
    {"query": {"match": {"name": "weather"}}, "version": True, "seq_no_primary_term": True, "timeout": "30s"},
    {"query": {"match": {"name": {"query": "x", "fuzziness": "AUTO:2"}}}},
    {"query": {"match_all": {}}, "sort": ["_score"], "search_after": [0.5]},
    {"query": {"match_all": {}}, "sort": ["name"]},
    {"query": {"match_all": {}}, "aggs": {"names": {"terms": {"field": "name"}}}},
    {"query": {"match": {"name.keyword": "Hello World"}}},
    {"query": {"term": {"name": {"value": "HELLO", "case_insensitive": True}}}},
    {
        "query": {
            "dis_max": {"queries": [{"match": {"name": "paris"}}, {"match": {"name": "travel"}}], "tie_breaker": 0.5}
        }
    },
    {"query": {"match_phrase": {"name": "東京 travel"}}},
    {"query": {"match": {"name": {"query": "the weather", "zero_terms_query": "all", "operator": "and"}}}},
    {"query": {"regexp": {"name": "wea.*"}}},
)

MESSAGE_QUERIES: tuple[dict[str, object], ...] = (
    {"query": {"match": {"input": "weather"}}},
    {"query": {"match": {"response": "paris tokyo"}}},
    {"query": {"term": {"origin": "web"}}},
    {"query": {"term": {"input": "weather"}}},
    {"query": {"match_phrase": {"response": "in paris"}}},
    {"query": {"multi_match": {"query": "tokyo paris", "fields": ["input", "response"]}}},
    {"query": {"multi_match": {"query": "tokyo weather", "fields": ["input", "response"], "type": "most_fields"}}},
    {"query": {"multi_match": {"query": "tokyo weather", "fields": ["input", "response"], "type": "cross_fields"}}},
    {"query": {"multi_match": {"query": "weather", "fields": ["input", "response"], "tie_breaker": 0.3}}},
    {"query": {"simple_query_string": {"query": "tokyo -flight*"}}},
    {"query": {"query_string": {"query": "input:(weather OR joke) AND NOT origin:app"}}},
    {"query": {"query_string": {"query": "create_time:[2020-01-01T00:00:00Z TO *] AND origin:web"}}},
    {"query": {"query_string": {"query": "create_time:{* TO now} AND NOT create_time:<1577836800000"}}},
    {"query": {"match": {"additional_info.lang": "ja"}}},
    {"query": {"match": {"response": "paris tokyo"}}, "min_score": 0.5},
    {"query": {"match_all": {}}, "sort": [{"create_time": "asc"}]},
    {"query": {"match": {"input": "weather"}}, "highlight": {"fields": {"input": {}, "response": {}}}},
    {"query": {"match_all": {}}, "size": 0, "aggs": {"origins": {"terms": {"field": "origin"}}}},
    {
        "query": {"exists": {"field": "input"}},
        "size": 0,
        "aggs": {
            "low": {"min": {"field": "trace_number"}},
            "high": {"max": {"field": "trace_number"}},
            "mean": {"avg": {"field": "trace_number"}},
            "total": {"sum": {"field": "trace_number"}},
        },
    },
    {"query": {"match": {"response": "tokyo"}}, "sort": [{"origin": "desc"}], "search_after": ["web"]},
    {"query": {"match": {"input": "weather"}}, "version": True, "seq_no_primary_term": True},
    {"query": {"match": {"input": "weather"}}, "timeout": "soon"},
    {
        "query": {"match": {"input": "weather"}},
        "highlight": {"fields": {"input": {}}, "pre_tags": ["<b>"], "post_tags": ["</b>"]},
    },
    {"query": {"fuzzy": {"input": {"value": "wheather", "fuzziness": "AUTO", "prefix_length": 1}}}},
    {"query": {"match": {"input": {"query": "weathre", "fuzziness": 1, "fuzzy_transpositions": False}}}},
)


async def refused_bodies(d: Differ) -> None:
    """What a careless or hostile caller sends: duplicate keys, negative boosts, a terms list over the
    node's limit, bad search options."""
    await d.send("POST", M, {"name": "searchy one"})
    await d.send("POST", M, raw='{"name": "a", "name": "b"}')
    await d.send("PUT", f"{M}/<id:0>", raw='{"name": "a", "name": "b"}')
    await d.send("POST", f"{M}/<id:0>/messages", raw='{"input": "a", "input": "b"}')
    await d.send("POST", f"{M}/_search", raw='{"query": {"match_all": {}}, "query": {"match_all": {}}}')
    for query in (
        {"match": {"name": {"query": "searchy", "boost": -1}}},
        {"term": {"application_type": {"value": "x", "boost": -2}}},
        {"match": {"name": {"query": "searchy", "operator": "and", "boost": -0.5, "_name": "n"}}},
        {"match": {"name": {"query": "searchy", "boost": 0}}},
        {"terms": {"name": [f"v{n}" for n in range(65537)]}},
        {"terms": {"name": [f"v{n}" for n in range(65536)]}},
    ):
        await d.send("POST", f"{M}/_search", {"query": query})
    for options in (
        {"track_total_hits": -5},
        {"track_total_hits": -1},
        {"track_total_hits": False},
        {"track_total_hits": 0},
        {"track_total_hits": True},
        {"sort": [{"nofield": "asc"}]},
        {"sort": [{"nofield": {"order": "asc", "unmapped_type": "keyword"}}]},
        {"sort": [{"create_time": "asc"}], "search_after": ["abc"]},
        {"sort": [{"create_time": "asc"}], "search_after": [True]},
        {"sort": [{"create_time": "asc"}], "search_after": ["1700000000000"]},
        {"sort": [{"create_time": "asc"}], "search_after": [1700000000000]},
        {"sort": [{"create_time": "desc"}], "search_after": ["now"]},
    ):
        await d.send("POST", f"{M}/_search", {"query": {"match_all": {}}, **options})
    await d.send("GET", f"{M}/<id:0>")


async def searches(d: Differ) -> None:
    for name, application_type in SEARCH_NAMES:
        body: dict[str, object] = {"name": name}
        if application_type is not None:
            body["application_type"] = application_type
        await d.send("POST", M, body)
    for query in MEMORY_QUERIES:
        await d.send("POST", f"{M}/_search", query)
    await d.send("POST", M, {})  # no name: its messages' updates add nothing to the name statistics
    chat = f"<id:{len(SEARCH_NAMES)}>"
    for message in SEARCH_MESSAGES:
        await d.send("POST", f"{M}/{chat}/messages", message)
    await d.send(
        "POST",
        f"{M}/{chat}/messages",
        {"input": "trace of weather", "parent_message_id": f"<id:{len(SEARCH_NAMES) + 1}>", "trace_number": 1},
    )
    for query in MESSAGE_QUERIES:
        await d.send("POST", f"{M}/{chat}/_search", query)


async def opensearch_py(d: Differ) -> None:
    """What a program using opensearch-py's ``plugins.ml`` does: the returned bodies and the raised errors.

    Searches come before any update of the documents they score: Lucene counts an
    updated document's old version in its term statistics until a merge, so after
    updates the real node's BM25 scores depend on its segment merges.
    """
    ml = d.call
    await ml("create_memory", body={"name": "client", "application_type": "chatbot", "additional_info": {"k": "v"}})
    await ml("create_memory", body={})
    await ml("search_memory", body={"query": {"term": {"application_type": "chatbot"}}})
    await ml("search_memory", body={"query": {"match_all": {}}, "sort": [{"create_time": "asc"}], "size": 1})
    await ml("get_memory", memory_id="<id:0>")
    await ml("get_all_memories")
    await ml("get_all_memories", max_results=1)
    await ml("get_all_memories", max_results=1, next_token=1)
    await ml("create_message", memory_id="<id:0>", body={"input": "hello", "response": "hi", "origin": "o"})
    await ml(
        "create_message", memory_id="<id:0>", body={"input": 1, "response": True, "additional_info": EVERY_JSON_TYPE}
    )
    await ml("search_message", memory_id="<id:0>", body={"query": {"match": {"input": "hello"}}})
    await ml(
        "create_message", memory_id="<id:0>", body={"input": "t", "parent_message_id": "<id:2>", "trace_number": 1}
    )
    await ml("update_memory", memory_id="<id:0>", body={"name": "renamed", "additional_info": {"k": "w"}})
    await ml("update_memory", memory_id="<id:1>", body={})
    await ml("get_memory", memory_id="<id:0>")
    await ml("get_message", message_id="<id:2>")
    await ml("get_all_messages", memory_id="<id:0>")
    await ml("get_all_messages", memory_id="<id:0>", max_results=1, next_token=1)
    await ml("get_message_traces", message_id="<id:2>")
    await ml("update_message", message_id="<id:2>", body={"additional_info": {"rated": "5"}})
    await ml("get_message", message_id="<id:2>")
    await ml("get_all_memories", filter_path="memories.name")
    await ml("get_memory", memory_id="<id:0>", filter_path="name")
    # What a client sees raised: class, status and error body.
    await ml("get_memory", memory_id="never-existed")
    await ml("get_message", message_id="never-existed")
    await ml("get_all_messages", memory_id="never-existed")
    await ml("create_message", memory_id="never-existed", body={"input": "x"})
    await ml("create_message", memory_id="<id:0>", body={})
    await ml("create_message", memory_id="<id:0>", body={"input": None})
    await ml("get_all_memories", max_results=0)
    await ml("get_all_messages", memory_id="<id:0>", next_token="abc")
    await ml("update_memory", memory_id="<id:0>", body={"name": {"a": 1}})
    await ml("search_message", memory_id="<id:0>", body={"size": -1})
    await ml("delete_memory", memory_id="<id:0>")
    await ml("get_memory", memory_id="<id:0>")
    await ml("get_message", message_id="<id:2>")
    await ml("delete_memory", memory_id="<id:0>")
    await ml("get_all_memories")


async def tried_as_a_new_user(d: Differ) -> None:
    """What a new user ran into (issue 25, fidelity items): searches without a body or with
    a ``q``, a truncated body, a message whose memory is gone, a trace in the message list."""
    await d.send("POST", M, {"name": "billing"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "billing question", "response": "answer"})
    await d.send("POST", f"{M}/<id:0>/messages", {"input": "trace", "parent_message_id": "<id:1>", "trace_number": 1})
    await d.send("GET", f"{M}/<id:0>/messages")
    await d.send("GET", f"{M}/message/<id:1>/traces")
    await d.send("GET", f"{M}/message/<id:2>")
    for method in ("POST", "GET"):
        await d.send(method, f"{M}/_search")
        await d.send(method, f"{M}/<id:0>/_search")
    await d.send("GET", f"{M}/_search?q=billing")
    await d.send("POST", f"{M}/_search", raw='{"query": {"match_all": {}}')
    await d.send("POST", f"{M}/<id:0>/_search", raw='{"query": {"match_all": {}}')
    await d.send("POST", f"{M}/<id:0>/messages", raw='{"input": "x"')
    for n in range(5):  # equal scores: the real node answers them in index order
        await d.send("POST", M, {"name": f"same {n}"})
        await d.send("POST", f"{M}/<id:0>/messages", {"input": f"same words {n}", "response": "same"})
    # constant scores only: BM25's statistics on the real node count every scenario's memories
    for body in ({"query": {"match_all": {}}}, {"query": {"term": {"response": "same"}}}):
        await d.send("POST", f"{M}/<id:0>/_search", body)
        await d.send("POST", f"{M}/_search", body)
    await d.send("DELETE", f"{M}/<id:0>")
    await d.send("GET", f"{M}/message/<id:1>")
    await d.send("GET", f"{M}/message/<id:1>/traces")


SCENARIOS: dict[str, Scenario] = {
    "tried_as_a_new_user": tried_as_a_new_user,
    "create_get_list": create_get_list,
    "messages_and_traces": messages_and_traces,
    "updates": updates,
    "deletes": deletes,
    "bad_input": bad_input,
    "paging_errors": paging_errors,
    "parameters": parameters,
    "content_types": content_types,
    "filter_path": filter_path,
    "searches": searches,
    "refused_bodies": refused_bodies,
    "opensearch_py": opensearch_py,
}

#: Scenarios whose answers come from the search engine itself: only a store that runs
#: the query DSL in OpenSearch answers them as the real node does.
OPENSEARCH_SCENARIOS: dict[str, Scenario] = {"filtered_searches": filtered_searches}
