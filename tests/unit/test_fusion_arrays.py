"""The hybrid ranking's scores over arrays (``fusion_arrays``) are ``fusion``'s dict loops' to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from memory_plugin.histories.stores import fusion, fusion_arrays
from memory_plugin.histories.stores.records import SCORE_DECIMALS


def test_rounded_is_round_to_the_bit_even_beside_a_half() -> None:
    rng = np.random.default_rng(1)
    halves = (np.arange(-2000, 2000) + 0.5) / 10.0**SCORE_DECIMALS
    beside = [np.nextafter(halves, side) for side in (-np.inf, np.inf)]
    values = np.concatenate([rng.random(20_000), rng.normal(0, 20, 5000), halves, *beside, [0.0, -0.0, 1.0, 1e15]])
    assert fusion_arrays.rounded(values).tolist() == [round(value, SCORE_DECIMALS) for value in values.tolist()]


@pytest.mark.parametrize("seed", range(40))
def test_fused_spread_and_sittings_as_the_reference(seed: int) -> None:
    """Random lists of chunks with shared ranks, neighbours inside and outside the lists, users (None among them)
    and times around the sitting gap: each step's scores equal ``fusion``'s."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 250))
    keys = rng.permutation(10_000)[:size].tolist()
    dense = rng.permutation(size)[: int(rng.integers(0, size + 1))]
    keyword = rng.permutation(size)[: int(rng.integers(0, size + 1))]
    fused = fusion_arrays.fused_scores(dense, keyword, size)
    reference = fusion.fused_scores([keys[at] for at in dense], [keys[at] for at in keyword])
    listed = sorted(set(dense.tolist()) | set(keyword.tolist()))
    assert {keys[at]: fused[at] for at in listed} == reference
    assert all(fused[at] == 0.0 for at in set(range(size)) - set(listed))

    ties = rng.integers(0, size, size)  # repeated ranks: ties that fall to the position order
    lenders = fusion_arrays.best_first(fused, ties)[: fusion.LENDERS].tolist()
    order = sorted(range(size), key=lambda at: (-fused[at], ties[at]))
    assert lenders == order[: fusion.LENDERS]
    total = size + int(rng.integers(0, 60))
    neighbours = [rng.integers(0, total, int(rng.integers(0, 3))).tolist() for _ in lenders]
    spread = fusion_arrays.spread_scores(fused, total, lenders, neighbours)
    more = [*keys, *range(20_000, 20_000 + total - size)]
    expected = fusion.spread_scores(
        [(keys[at], float(fused[at])) for at in order],
        {more[lender]: [more[at] for at in near] for lender, near in zip(lenders, neighbours)},
    )
    reached = set(range(size)) | {at for near in neighbours for at in near}
    assert {more[at]: spread[at] for at in reached} == expected

    users = rng.integers(0, 4, total)
    names = [None, "u1", "u2", "u3"]
    times = np.cumsum(rng.choice([0, 1, fusion.SITTING_GAP, fusion.SITTING_GAP + 1, 10**10], total))
    times = rng.permutation(times)
    lifted = fusion_arrays.sitting_scores(spread, users, times)
    when = {more[at]: (names[users[at]], int(times[at])) for at in range(total)}
    expected_sittings = fusion.sitting_scores({more[at]: float(spread[at]) for at in range(total)}, when)
    assert {more[at]: lifted[at] for at in range(total)} == expected_sittings
