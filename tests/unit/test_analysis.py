"""The standard analyzer and BM25 against answers recorded from a real OpenSearch 2.19.1 node.

The conformance tier checks the same against the live node
(``tests/conformance/test_analyzer.py``); these recorded answers keep the fast
tier honest when no node runs.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from memory_plugin.dsl import MESSAGE_FIELDS, META_FIELDS, execute, parse_search
from memory_plugin.dsl.analysis import analyze
from memory_plugin.dsl.scoring import norm_length
from memory_plugin.errors import ShardFailure

#: ``[text, tokens, types, positions]`` from ``POST /_analyze {"analyzer": "standard"}`` on OpenSearch 2.19.1.
ANSWERS = json.loads((Path(__file__).parent / "data" / "standard_analyzer_answers.json").read_text("utf-8"))


@pytest.mark.parametrize(("text", "tokens"), [(a[0], a[1]) for a in ANSWERS], ids=[repr(a[0][:24]) for a in ANSWERS])
def test_tokens_are_the_real_standard_analyzers(text: str, tokens: list[str]) -> None:
    assert analyze(text) == tokens


def test_norm_lengths_are_lucenes_one_byte_lengths() -> None:
    assert [norm_length(n) for n in (0, 1, 23, 24, 25, 40, 41, 100, 1000)] == [0, 1, 23, 24, 25, 40, 40, 96, 984]


NAMES = [
    "Weather chat about the weather",
    "Travel plans for Paris",
    "weather report",
    "Hello World",
    "Café résumé naïve CAFÉ",
    "東京 travel 日本 😀",
    "Don't panic: it's 3.14 o'clock at example.com",
    "The quick brown fox jumps over the lazy dog near Paris weather station",
]
TYPES = ["chatbot", "agent", "chatbot", None, None, "agent", "chatbot", None]
DOCS = [
    (str(i), {"name": n, **({"application_type": t} if t else {})}, 1) for i, (n, t) in enumerate(zip(NAMES, TYPES))
]


@pytest.mark.parametrize(
    ("query", "scores"),
    [  # recorded from the real node over these eight memories
        ({"match": {"name": "weather"}}, {"0": 1.3246267, "2": 1.2709255, "7": 0.59763265}),
        ({"match": {"name": {"query": "weather paris", "operator": "and"}}}, {"7": 1.4081769}),
        ({"term": {"application_type": "chatbot"}}, {"0": 0.53899646, "2": 0.53899646, "6": 0.53899646}),
        ({"match": {"name": "東京"}}, {"5": 3.4207964}),
        ({"match_phrase": {"name": "the weather"}}, {"0": 2.2907772}),
        ({"fuzzy": {"name": "wether"}}, {"0": 1.1038556, "2": 1.0591046}),
    ],
)
def test_bm25_scores_are_the_real_nodes(query: dict[str, object], scores: dict[str, float]) -> None:
    result = execute(parse_search({"query": query, "size": 100}, fields=META_FIELDS), DOCS)
    got = {h.id: h.score for h in result.hits}
    for doc_id, score in scores.items():
        # the node's scores are Lucene float32s printed to 8 digits (about 3e-7 apart at 3.4); ours are doubles
        assert math.isclose(got[doc_id], score, abs_tol=1e-5), (doc_id, got)


def test_term_on_a_text_field_matches_an_analysed_token_only() -> None:
    body = parse_search({"query": {"term": {"input": "Weather"}}}, fields=MESSAGE_FIELDS)
    assert execute(body, [("m", {"input": "Weather"})]).total == 0
    body = parse_search({"query": {"term": {"input": "weather"}}}, fields=MESSAGE_FIELDS)
    assert execute(body, [("m", {"input": "Weather"})]).total == 1


def test_hostile_fuzziness_and_query_strings_stay_bounded() -> None:
    docs = [(str(i), {"input": f"word{i} " * 50}) for i in range(200)]
    body = parse_search(
        {"query": {"match": {"input": {"query": "x" * 5000, "fuzziness": 10**9}}}}, fields=MESSAGE_FIELDS
    )
    assert execute(body, docs, budget=0.25).total == 0
    body = parse_search({"query": {"query_string": {"query": " OR ".join(["a*"] * 1000)}}}, fields=MESSAGE_FIELDS)
    assert execute(body, docs, budget=0.25).total == 0


def test_more_clauses_than_lucene_allows_is_a_400_naming_the_limit() -> None:
    words = " ".join(f"w{i}" for i in range(1100))
    with pytest.raises(ShardFailure, match=r"maxClauseCount is set to 1024"):
        parse_search({"query": {"match": {"name": words}}}, fields=META_FIELDS)
    with pytest.raises(ShardFailure, match=r"maxClauseCount is set to 1024"):
        parse_search({"query": {"bool": {"should": [{"match_all": {}}] * 1100}}})


def test_the_ascii_path_follows_the_general_word_break_rules() -> None:
    """ASCII text skips the general segmenter; the two must agree on every mix of letters, digits and marks."""
    from memory_plugin.dsl.analysis import _ascii_tokens, _tokens

    rng = random.Random(7)
    alphabet = "ab Z09_'.,;:-/@#*?!\"()\t\n$%&+=<>[]{}|~^`\\"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        assert _ascii_tokens(text) == _tokens(text), text


def test_a_spent_budget_answers_timed_out_even_with_highlights() -> None:
    docs = [(str(i), {"input": f"word{i} weather"}) for i in range(5000)]
    body = parse_search(
        {"query": {"match": {"input": "weather"}}, "highlight": {"fields": {"input": {}}}}, fields=MESSAGE_FIELDS
    )
    result = execute(body, docs, budget=0.0)
    assert result.timed_out and result.total == 0
