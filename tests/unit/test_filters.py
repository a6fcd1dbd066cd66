"""Parsing of ``filter[...]`` query parameters and the reference evaluator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_plugin.errors import InvalidArgument
from memory_plugin.histories.stores.filters import Condition, Filter, matches, parse_filters
from memory_plugin.histories.stores.records import Record

UTC = UTC


def parse_one(key: str, value: str) -> Condition:
    (condition,) = parse_filters([(key, value)]).conditions
    return condition


def test_eq_is_the_default_and_other_pairs_are_ignored() -> None:
    where = parse_filters([("q", "hello"), ("top_k", "5"), ("filter[user_id]", "u-1")])
    assert where == Filter((Condition("user_id", "eq", ("u-1",)),))


def test_every_operator() -> None:
    for op in ("eq", "in", "gte", "gt", "lte", "lt", "contains"):
        assert parse_one(f"filter[user_id][{op}]", "a").op == op


def test_in_splits_and_drops_empty_items() -> None:
    assert parse_one("filter[region][in]", "USA,,DEU,").values == ("USA", "DEU")


def test_unknown_names_are_metadata() -> None:
    assert parse_one("filter[language]", "en") == Condition("metadata.language", "eq", ("en",))
    assert parse_one("filter[Some-key_9]", "x").field == "metadata.Some-key_9"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC)),
        ("2026-01-01", datetime(2026, 1, 1, tzinfo=UTC)),
        ("2026-01-01T02:30:00+02:00", datetime(2026, 1, 1, 0, 30, tzinfo=UTC)),
        ("2026-01-01T00:00:00.123456Z", datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)),
        ("2026-01-01T05:00:00", datetime(2026, 1, 1, 5, tzinfo=UTC)),
    ],
)
def test_dates_become_aware_utc(text: str, expected: datetime) -> None:
    (value,) = parse_one("filter[record_created_at][gte]", text).values
    assert value == expected and value.tzinfo == UTC  # type: ignore[union-attr]


def test_in_on_dates() -> None:
    assert parse_one("filter[ingested_at][in]", "2026-01-01,2026-01-02T00:00:00Z").values == (
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 2, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("filter[user_id][like]", "x", "unknown operator 'like'"),
        ("filter[user_id][EQ]", "x", "unknown operator 'EQ'"),
        ("filter[user_id][]", "x", "unknown operator ''"),
        ("filter[a.b]", "x", "invalid filter field"),
        ("filter[]", "x", "invalid filter field"),
        ("filter[" + "a" * 65 + "]", "x", "invalid filter field"),
        ("filter[a b]", "x", "invalid filter field"),
        ("filter[user_id", "x", "malformed"),
        ("filter[user_id]x", "x", "malformed"),
        ("filter[user_id][eq][eq]", "x", "malformed"),
        ("filter[a[b]]", "x", "malformed"),
        ("filter[user_id]", "", "needs a value"),
        ("filter[region][in]", ",,", "needs a value"),
        ("filter[record_created_at][gte]", "yesterday", "malformed date"),
        ("filter[ingested_at]", "2026-13-01", "malformed date"),
        ("filter[record_created_at][in]", "2026-01-01,nope", "malformed date"),
        ("filter[record_created_at][contains]", "2026", "'contains' does not apply"),
    ],
)
def test_rejections_name_the_parameter(key: str, value: str, fragment: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_filters([(key, value)])
    assert caught.value.parameter == key
    assert fragment in caught.value.reason
    assert caught.value.status == 400


def record(**changes: object) -> Record:
    fields: dict[str, object] = dict(
        organization_id="o",
        record_id="rec-1",
        record_type="voice",
        region="USA",
        record_created_at=datetime(2026, 1, 10, tzinfo=UTC),
        ingested_at=datetime(2026, 1, 11, tzinfo=UTC),
        user_id="User-1",
        metadata={"lang": "Français", "n": 5, "x": 7.5, "flag": True, "s": "10"},
    )
    fields.update(changes)
    return Record(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ([("filter[user_id]", "User-1")], True),
        ([("filter[user_id]", "user-1")], False),
        ([("filter[user_id][contains]", "ser-")], True),
        ([("filter[user_id][in]", "a,User-1")], True),
        ([("filter[user_id][gt]", "User-0")], True),
        ([("filter[document_id]", "d")], False),  # None never matches
        ([("filter[record_created_at][gte]", "2026-01-10")], True),
        ([("filter[record_created_at][gt]", "2026-01-10")], False),
        ([("filter[record_created_at][lt]", "2026-01-10T01:00:00+01:00")], False),
        ([("filter[record_created_at][lte]", "2026-01-10T01:00:00+01:00")], True),
        ([("filter[lang][contains]", "ANÇ")], True),
        ([("filter[lang][gt]", "F")], True),
        ([("filter[n]", "5")], True),
        ([("filter[n]", "5.0")], True),
        ([("filter[n]", "05")], True),
        ([("filter[n][gt]", "10")], False),  # numeric, not "5" > "10"
        ([("filter[n][contains]", "5")], False),  # contains is for strings
        ([("filter[x][lte]", "7.5")], True),
        ([("filter[s][gt]", "9")], False),  # a numeric filter skips string values
        ([("filter[s][gt]", "1")], False),
        ([("filter[s][gt]", "0a")], True),  # a non-numeric filter compares strings
        ([("filter[s]", "10")], True),
        ([("filter[flag]", "true")], True),
        ([("filter[flag]", "True")], False),
        ([("filter[flag][in]", "false,1")], False),
        ([("filter[flag][gt]", "a")], False),
        ([("filter[missing]", "x")], False),
        ([("filter[user_id]", "User-1"), ("filter[n][gte]", "6")], False),
        ([], True),
    ],
)
def test_matches(params: list[tuple[str, str]], expected: bool) -> None:
    assert matches(parse_filters(params), record()) is expected


def test_matches_treats_naive_record_dates_as_utc() -> None:
    naive = record(record_created_at=datetime(2026, 1, 10) + timedelta(hours=1))
    assert matches(parse_filters([("filter[record_created_at]", "2026-01-10T01:00:00Z")]), naive)
