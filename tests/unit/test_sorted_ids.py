import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from memory_plugin.sorted_ids import runs, sorted_distinct


@given(arrays(np.int64, st.integers(0, 300), elements=st.integers(-(2**63), 2**63 - 1)))
def test_sorted_distinct_is_numpys_unique(ids: np.ndarray) -> None:
    got = sorted_distinct(ids)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.unique(ids))


@given(arrays(np.int64, st.integers(0, 300), elements=st.integers(0, 20)))
def test_sorted_distinct_drops_every_repeat(ids: np.ndarray) -> None:
    got = sorted_distinct(ids)
    assert set(got.tolist()) == set(ids.tolist())
    assert np.all(got[1:] > got[:-1])


def test_sorted_distinct_leaves_its_input_alone() -> None:
    ids = np.array([3, 1, 3, 2], dtype=np.int64)
    assert sorted_distinct(ids).tolist() == [1, 2, 3]
    assert ids.tolist() == [3, 1, 3, 2]


@given(arrays(np.int64, st.integers(0, 300), elements=st.integers(-5, 20)))
def test_runs_are_numpys_unique_with_first_indexes(ids: np.ndarray) -> None:
    ordered = np.sort(ids)
    distinct, starts = runs(ordered)
    expected, expected_starts = np.unique(ordered, return_index=True)
    assert np.array_equal(distinct, expected)
    assert np.array_equal(starts, expected_starts)
