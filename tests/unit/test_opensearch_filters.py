"""Golden tests of the OpenSearch DSL that filters compile to (no node needed)."""

from __future__ import annotations

import pytest

from memory_plugin.histories.stores.filters import Condition, Filter, parse_filters
from memory_plugin.histories.stores.opensearch_filters import compile_filter, escape_wildcard


def dsl(*pairs: tuple[str, str]) -> list[dict]:  # type: ignore[type-arg]
    return compile_filter(parse_filters(list(pairs)))


def test_empty_filter_is_no_clause() -> None:
    assert compile_filter(Filter()) == []


def test_top_level_eq_in_range_contains() -> None:
    assert dsl(("filter[user_id]", "u-1")) == [{"terms": {"user_id": ["u-1"]}}]
    assert dsl(("filter[region][in]", "USA,DEU")) == [{"terms": {"region": ["USA", "DEU"]}}]
    assert dsl(("filter[user_id][gte]", "m")) == [{"range": {"user_id": {"gte": "m"}}}]
    assert dsl(("filter[retention][contains]", "LONG")) == [{"wildcard": {"fold.retention": {"value": "*long*"}}}]


def test_dates_compare_as_exact_microseconds() -> None:
    assert dsl(("filter[record_created_at][gt]", "2026-01-11T02:00:00.000010+02:00")) == [
        {"range": {"record_created_at_us": {"gt": 1_768_089_600_000_010}}}
    ]
    assert dsl(("filter[ingested_at][in]", "1970-01-01,1969-12-31T23:59:59.999999Z")) == [
        {"terms": {"ingested_at_us": [0, -1]}}
    ]


def test_metadata_eq_follows_the_reference_types() -> None:
    assert dsl(("filter[language]", "en")) == [{"term": {"meta_str.language": "en"}}]
    assert dsl(("filter[score]", "5")) == [
        {
            "bool": {
                "should": [{"term": {"meta_str.score": "5"}}, {"term": {"meta_num.score": 5.0}}],
                "minimum_should_match": 1,
            }
        }
    ]
    assert dsl(("filter[urgent]", "true")) == [
        {
            "bool": {
                "should": [{"term": {"meta_str.urgent": "true"}}, {"term": {"meta_bool.urgent": True}}],
                "minimum_should_match": 1,
            }
        }
    ]
    # Many values: one terms query per JSON type, never a clause per value (max_clause_count).
    assert dsl(("filter[x][in]", "a,b")) == [{"terms": {"meta_str.x": ["a", "b"]}}]
    assert dsl(("filter[x][in]", "a,5,true")) == [
        {
            "bool": {
                "should": [
                    {"terms": {"meta_str.x": ["a", "5", "true"]}},
                    {"terms": {"meta_bool.x": [True]}},
                    {"terms": {"meta_num.x": [5.0]}},
                ],
                "minimum_should_match": 1,
            }
        }
    ]


def test_metadata_ranges_are_numeric_or_string_never_both() -> None:
    assert dsl(("filter[score][lt]", "1e1")) == [{"range": {"meta_num.score": {"lt": 10.0}}}]
    assert dsl(("filter[language][gt]", "E")) == [{"range": {"meta_str.language": {"gt": "E"}}}]


def test_contains_folds_and_escapes_wildcards() -> None:
    assert dsl(("filter[note][contains]", "A*B?C\\D")) == [
        {"wildcard": {"meta_fold.note": {"value": "*a\\*b\\?c\\\\d*"}}}
    ]
    assert dsl(("filter[note][contains]", "STRASSE")) == [{"wildcard": {"meta_fold.note": {"value": "*strasse*"}}}]
    assert dsl(("filter[note][contains]", "Straße")) == [{"wildcard": {"meta_fold.note": {"value": "*strasse*"}}}]
    assert escape_wildcard("**") == "\\*\\*"


def test_json_fragments_stay_values() -> None:
    value = '"}},{"match_all":{}}'
    assert dsl(("filter[user_id]", value)) == [{"terms": {"user_id": [value]}}]


def test_conditions_are_a_conjunction() -> None:
    assert dsl(("filter[user_id]", "u"), ("filter[language]", "en")) == [
        {"terms": {"user_id": ["u"]}},
        {"term": {"meta_str.language": "en"}},
    ]


@pytest.mark.parametrize("field", ["a.b", "data.metadata.x", "x]", "", "organization_id\u0000"])
def test_hand_built_fields_are_refused(field: str) -> None:
    with pytest.raises(ValueError):
        compile_filter(Filter((Condition(f"metadata.{field}", "eq", ("v",)),)))
    with pytest.raises(ValueError):
        compile_filter(Filter((Condition(field or "nope", "eq", ("v",)),)))
