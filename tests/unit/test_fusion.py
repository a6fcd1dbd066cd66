"""Hybrid ranking's last step: a hit is lifted by the evidence of its sitting (its user's run of records
without a long pause), read from the hits themselves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from memory_plugin.histories.stores.fusion import SITTING_GAP, lift_sittings
from memory_plugin.histories.stores.records import Hit, Record

START = datetime(2026, 5, 1, 12, tzinfo=UTC)


def hit(record_id: str, score: float, at: timedelta, user: str | None = "u1") -> Hit:
    record = Record("org", record_id, "message", "USA", START + at, START, user_id=user)
    return Hit(record, 0, 1, record_id, score)


def test_a_hit_in_a_sitting_of_other_matches_passes_a_lone_match():
    hits = [
        hit("lone", 0.50, timedelta(days=3)),
        hit("a1", 0.45, timedelta(seconds=0)),
        hit("a2", 0.30, timedelta(seconds=20)),
        hit("a3", 0.30, timedelta(minutes=10)),
    ]
    lifted = lift_sittings(hits)
    assert [h.record.record_id for h in lifted] == ["a1", "lone", "a2", "a3"]
    assert all(0 < h.score <= 1 for h in lifted)
    scores = {h.record.record_id: h.score for h in lifted}
    assert scores["a2"] == scores["a3"]  # one sitting: the same evidence, the same own score


def test_a_pause_longer_than_the_gap_or_another_user_starts_another_sitting():
    apart = [hit("a1", 0.5, timedelta(0)), hit("a2", 0.5, timedelta(microseconds=SITTING_GAP + 1))]
    together = [hit("a1", 0.5, timedelta(0)), hit("a2", 0.5, timedelta(microseconds=SITTING_GAP))]
    others = [hit("a1", 0.5, timedelta(0)), hit("a2", 0.5, timedelta(seconds=1), user="u2")]
    alone = lift_sittings(apart)[0].score
    assert lift_sittings(others)[0].score == alone
    assert lift_sittings(together)[0].score > alone


def test_the_best_hit_of_the_best_sitting_scores_one():
    hits = [hit(f"a{i}", 1.0, timedelta(seconds=i)) for i in range(4)]
    assert {h.score for h in lift_sittings(hits)} == {1.0}
    assert lift_sittings([]) == []
    assert np.isclose(lift_sittings([hit("x", 1.0, timedelta(0))])[0].score, 1.2 / 1.6)
