"""The retention engine's rules on an in-memory double of the retention store (the stores themselves are
tested on SQLite and OpenSearch in tests/http/test_agentic_retention.py and its OpenSearch rerun)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from memory_plugin.agentic.retention import DAY_MILLIS, Retention, normalized
from memory_plugin.agentic.retention_policy import merged_policy, parse_policy
from memory_plugin.agentic.retention_settings import RetentionDefaults
from memory_plugin.agentic.retention_views import plan_view
from memory_plugin.agentic.stores.base import StoredDoc
from memory_plugin.agentic.stores.retention import RetentionStore, Snapshot
from memory_plugin.auth import Principal
from memory_plugin.settings import RetentionSection, load_settings

NOW = 1_800_000_000_000
OWNER = Principal("org", "u")


class Docs(RetentionStore):
    def __init__(self, docs: dict[str, list[Snapshot]]) -> None:
        self.docs = docs

    async def every_container(self) -> list[tuple[Principal, StoredDoc]]:
        return []

    async def snapshot(self, organization_id: str, container_id: str, memory_type: str) -> list[Snapshot]:
        return list(self.docs.get(memory_type, []))

    async def delete_unchanged(
        self, organization_id: str, container_id: str, memory_type: str, docs: Sequence[Snapshot]
    ) -> list[str]:
        gone = {doc.id for doc in docs}
        self.docs[memory_type] = [doc for doc in self.docs.get(memory_type, []) if doc.id not in gone]
        return sorted(gone)


def snap(doc_id: str, **source: object) -> Snapshot:
    return Snapshot(doc_id, dict(source), 1)


def container(policy: dict[str, object] | None, **config: object) -> StoredDoc:
    configuration = {**config, **({"retention_policy": policy} if policy is not None else {})}
    return StoredDoc("c", {"configuration": {"llm_id": "x", "strategies": [{"type": "SEMANTIC"}], **configuration}})


def engine(docs: dict[str, list[Snapshot]], defaults: RetentionDefaults | None = None) -> Retention:
    return Retention(Docs(docs), defaults or RetentionDefaults(), enabled=True, clock=lambda: NOW)


def test_epoch_seconds_are_read_as_seconds_and_unreadable_times_as_none():
    assert normalized(1_700_000_000) == 1_700_000_000_000
    assert normalized(1_700_000_000_000) == 1_700_000_000_000
    assert normalized("1700000000") == 1_700_000_000_000
    assert normalized("soon") is None and normalized(None) is None and normalized(True) is None


async def test_sessions_are_the_union_of_expired_and_least_recently_updated_beyond_max_count():
    sessions = [
        snap("legacy", last_updated_time=(NOW - 5 * DAY_MILLIS) // 1000),  # epoch seconds, 5 days old
        snap("a", last_updated_time=NOW - 4 * DAY_MILLIS),
        snap("b", last_updated_time=NOW - 1000),
        snap("c", last_updated_time=NOW - 500),
        snap("undated"),
        snap("pinned", last_updated_time=1, pinned=True),
    ]
    working = [snap("w1", namespace={"session_id": "a"}), snap("w2", session_id="legacy"), snap("w3")]
    policy = {"sessions": {"retention_days": 2, "max_count": 3}}
    plan = await engine({"sessions": sessions, "working": working}).evaluate(OWNER, container(policy))
    report = plan_view(plan)
    # expired: legacy, a; over max_count (5 unpinned, keep 3): legacy, a again: nothing more by count
    assert report["would_delete"]["sessions"] == {"total": 2, "by_reason": {"retention_days": 2, "max_count": 0}}
    assert report["would_delete"]["working_memory"]["by_reason"]["cascade"] == 2
    assert report["pinned_would_skip"] == 1
    plan = await engine({"sessions": sessions}).evaluate(OWNER, container({"sessions": {"max_count": 2}}))
    # an undated session sorts last: the dated oldest go first
    assert {doc.id for doc in plan.plan("sessions").docs} == {"legacy", "a", "b"}


async def test_long_term_max_count_applies_to_what_the_time_rule_leaves():
    docs = [snap(f"m{n}", last_updated_time=NOW - n * DAY_MILLIS) for n in range(6)]
    policy = {"long-term": {"retention_days": 3, "max_count": 2}}
    plan = await engine({"long-term": docs}).evaluate(OWNER, container(policy))
    assert plan_view(plan)["would_delete"]["long_term"] == {
        "total": 4,
        "by_reason": {"retention_days": 2, "max_count": 2},
    }
    assert {doc.id for doc in plan.plan("long-term").docs} == {"m5", "m4", "m3", "m2"}


async def test_pinned_beyond_max_count_is_a_warning_and_nothing_pinned_goes():
    docs = [snap(f"h{n}", created_time=n, pinned=True) for n in range(3)] + [snap("h9", created_time=9)]
    plan = await engine({"history": docs}).evaluate(OWNER, container({"history": {"max_count": 1}}))
    assert plan_view(plan)["would_delete"]["history"]["total"] == 0
    assert plan.warnings == ["pinned count (3) exceeds max_count (1) for history — container will grow unbounded"]


async def test_defaults_are_the_policy_of_a_container_without_one_unless_it_opted_out():
    defaults = RetentionDefaults(session_max_count=1)
    docs = {"sessions": [snap("a", last_updated_time=1), snap("b", last_updated_time=2)]}
    plan = await engine(docs, defaults).evaluate(OWNER, container(None))
    assert plan.policy_source == "default" and [doc.id for doc in plan.plan("sessions").docs] == ["a"]
    stored = StoredDoc("c", {"configuration": {"retention_policy": None}})
    assert (await engine(docs, defaults).evaluate(OWNER, stored)).policy_source == "none"
    assert RetentionDefaults().policy() is None


def test_a_policy_update_merges_per_field_and_null_removes():
    current = {"sessions": {"retention_days": 30, "max_count": 5}}
    update = parse_policy({"Sessions": {"max_count": None}, "history": {"max_count": 2}})
    assert merged_policy(current, update) == {"sessions": {"retention_days": 30}, "history": {"max_count": 2}}


@pytest.mark.parametrize(
    "name,value",
    [
        ("AGENTIC_RETENTION_INTERVAL", "0"),
        ("AGENTIC_RETENTION_WORKING_MEMORY_TTL_DAYS", "366"),
        ("AGENTIC_RETENTION_DEFAULT_SESSION_MAX_COUNT", "-2"),
    ],
)
def test_retention_settings_out_of_ml_commons_bounds_are_refused(tmp_path, name, value):
    key = "agentic.retention." + name.lower().removeprefix("agentic_retention_")
    with pytest.raises(ValueError, match=re.escape(repr(key))):
        load_settings(environ={f"MEMORY_PLUGIN_{name}": value}, data_dir=tmp_path)


def test_the_defaults_come_from_the_retention_section_by_name():
    section = RetentionSection(default_session_max_count=3, default_history_max_count=9, working_memory_ttl_days=2)
    defaults = RetentionDefaults.of(section)
    assert (defaults.session_max_count, defaults.history_max_count, defaults.working_memory_ttl_days) == (3, 9, 2)
    assert (defaults.session_retention_days, defaults.long_term_max_count) == (-1, -1)
