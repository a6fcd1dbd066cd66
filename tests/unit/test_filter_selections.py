"""A repeated filter's answer is taken from the last one only while nothing was written since: a write,
a delete or another organisation never sees a kept answer, and the kept answers stay within their budget."""

from __future__ import annotations

import numpy as np
import pytest

from memory_plugin.histories.stores.filter_columns import FilterColumns
from memory_plugin.histories.stores.filters import DATE_FIELDS, TOP_LEVEL_FIELDS, Condition, Filter
from memory_plugin.histories.stores.vector_index import (
    SELECTIONS_BYTES,
    SELECTIONS_BYTES_PER_ROW,
    IndexParams,
    TypeIndex,
)

DIM = 8
USER_3 = Filter((Condition("user_id", "eq", ("user-3",)),))


def row(user: str) -> tuple[object, ...]:
    return (user, *(0 if field in DATE_FIELDS else None for field in TOP_LEVEL_FIELDS[1:]))


def new_index(rows: int) -> TypeIndex:
    params = IndexParams(dimension=DIM, hnsw_m=8, ef_construction=40, ef_search=40, exact_threshold=200_000)
    index = TypeIndex(params, TypeIndex.new_hnsw(params), rows)
    add(index, 1, rows)
    return index


def add(index: TypeIndex, first_id: int, count: int, org: int = 0) -> None:
    ids = np.arange(first_id, first_id + count)
    vectors = np.random.default_rng(first_id).standard_normal((count, DIM), dtype=np.float32)
    users = [row(f"user-{chunk % 10}") for chunk in ids]
    index.append(ids, vectors, np.full(count, org, dtype=np.int32), users, to_hnsw=False)


def passing(index: TypeIndex, org: int, user: str) -> list[int]:
    """The chunk ids of ``org``'s live chunks of ``user``, computed without the index's columns."""
    n = index.n
    return [int(index.ids[p]) for p in range(n) if index.orgs[p] == org and f"user-{index.ids[p] % 10}" == user]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Filter]:
    """The filters the columns were asked to answer."""
    asked: list[Filter] = []
    select = FilterColumns.select

    def counting(self: FilterColumns, where: Filter, used: int, within: np.ndarray) -> object:
        asked.append(where)
        return select(self, where, used, within)

    monkeypatch.setattr(FilterColumns, "select", counting)
    return asked


def test_a_repeated_filter_is_answered_once_until_a_write(counted: list[Filter]) -> None:
    index = new_index(2_000)
    first = index.selected(0, USER_3)
    again = index.selected(0, Filter((Condition("user_id", "eq", ("user-3",)),)))  # equal, not the same object
    assert counted == [USER_3] and again is first
    assert index.ids[first[1]].tolist() == passing(index, 0, "user-3")

    add(index, 5_001, 100)  # written since: answered afresh, with the new rows
    after_write = index.selected(0, USER_3)
    assert len(counted) == 2 and index.ids[after_write[1]].tolist() == passing(index, 0, "user-3")
    assert len(after_write[1]) == len(first[1]) + 10

    index.kill(np.array([3, 13, 5_003]))  # deleted since: gone from the answer
    after_kill = index.selected(0, USER_3)
    assert len(counted) == 3 and index.ids[after_kill[1]].tolist() == passing(index, 0, "user-3")
    assert not {3, 13, 5_003} & set(index.ids[after_kill[1]].tolist())


def test_organisations_and_filters_are_answered_apart(counted: list[Filter]) -> None:
    index = new_index(1_000)
    add(index, 2_001, 500, org=1)
    mine, theirs = index.selected(0, USER_3), index.selected(1, USER_3)
    assert index.ids[mine[1]].tolist() == passing(index, 0, "user-3")
    assert index.ids[theirs[1]].tolist() == passing(index, 1, "user-3")
    other = index.selected(0, Filter((Condition("user_id", "eq", ("user-4",)),)))
    assert index.ids[other[1]].tolist() == passing(index, 0, "user-4") and len(counted) == 3
    # the organisation alone, as an empty filter and as none, is one answer
    mask, positions = index.org_positions(1)
    assert index.selected(1, Filter())[1] is positions and int(mask.sum()) == len(positions) == 500


def test_the_kept_answers_stay_within_their_budget(counted: list[Filter]) -> None:
    index = new_index(100_000)
    assert index._selections.max_bytes == SELECTIONS_BYTES + SELECTIONS_BYTES_PER_ROW * 100_000
    add(index, 200_001, 100_000)  # grown: a budget for the larger index
    assert index._selections.max_bytes >= SELECTIONS_BYTES + SELECTIONS_BYTES_PER_ROW * 200_000
    index._selections.max_bytes = budget = 2 << 20
    pairs = [Filter((Condition("user_id", "in", (f"user-{u}", f"user-{(u + 1) % 10}")),)) for u in range(10)]
    for where in pairs:
        index.selected(0, where)
        assert 0 < index._selections.size <= budget
    assert len(index._selections) < len(pairs), "the least recently used went"
    index.selected(0, pairs[-1])
    assert counted.count(pairs[-1]) == 1, "the most recent stayed"
    everything = Filter((Condition("user_id", "in", tuple(f"user-{user}" for user in range(10))),))
    index.selected(0, everything)
    index.selected(0, everything)
    assert counted.count(everything) == 2, "over half the budget: never kept"
