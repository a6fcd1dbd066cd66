"""The consistency checker (tests/support/consistency.py) on small hand-made histories, good and bad."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.consistency import (
    AGENTIC_ADD,
    AGENTIC_DELETE,
    DELETE,
    FAIL,
    INFO,
    MESSAGE,
    OK,
    WRITE,
    Copy,
    History,
    Op,
    check_agentic,
    check_drained,
    check_messages,
    check_registers,
    check_views_agree,
    register_candidates,
    report,
)


def op(index: int, kind: str, key: str, value: str | None, invoke: float, complete: float, outcome: str, **kw) -> Op:
    detail = kw.pop("detail", "")
    return Op(index, 0, kind, key, value, invoke, 0, complete, outcome, None, detail, kw)


def w(index: int, value: str, invoke: float, complete: float, outcome: str = OK, region: str = "USA") -> Op:
    return op(index, WRITE, "r", value, invoke, complete, outcome, region=region)


def d(index: int, invoke: float, complete: float, outcome: str = OK) -> Op:
    return op(index, DELETE, "r", None, invoke, complete, outcome)


def kinds(anomalies) -> list[str]:
    return [a.kind for a in anomalies]


# -- registers ---------------------------------------------------------------------------------


def test_the_last_acknowledged_write_wins():
    ops = [w(0, "a", 0, 1), w(1, "b", 2, 3)]
    assert check_registers(ops, {"r": [Copy("USA", "b")]}) == []
    assert kinds(check_registers(ops, {"r": [Copy("USA", "a")]})) == ["stale-value"]


def test_concurrent_writes_may_end_either_way():
    ops = [w(0, "a", 0, 2), w(1, "b", 1, 3)]
    assert check_registers(ops, {"r": [Copy("USA", "a")]}) == []
    assert check_registers(ops, {"r": [Copy("USA", "b")]}) == []


def test_an_indeterminate_write_may_or_may_not_be_last():
    ops = [w(0, "a", 0, 1, INFO), w(1, "b", 2, 3)]
    assert [c.value if c else None for c in register_candidates(ops)] == ["a", "b"]
    assert check_registers(ops, {"r": [Copy("USA", "a")]}) == []
    assert check_registers(ops, {"r": [Copy("USA", "b")]}) == []
    assert kinds(check_registers(ops, {})) == ["lost-write"]


def test_only_indeterminate_writes_allow_absence():
    ops = [w(0, "a", 0, 1, INFO)]
    assert check_registers(ops, {}) == []
    assert check_registers(ops, {"r": [Copy("USA", "a")]}) == []


def test_a_lost_acknowledged_write_is_found():
    anomalies = check_registers([w(0, "a", 0, 1)], {})
    assert kinds(anomalies) == ["lost-write"] and "#0" in str(anomalies[0])


def test_a_failed_write_must_not_take_effect():
    ops = [w(0, "a", 0, 1), w(1, "b", 2, 3, FAIL)]
    assert check_registers(ops, {"r": [Copy("USA", "a")]}) == []
    assert kinds(check_registers(ops, {"r": [Copy("USA", "b")]})) == ["failed-write-applied"]


def test_an_acknowledged_delete_stays_deleted_unless_a_write_could_follow():
    ops = [w(0, "a", 0, 1), d(1, 2, 3)]
    assert check_registers(ops, {}) == []
    anomalies = check_registers(ops, {"r": [Copy("USA", "a")]})
    assert kinds(anomalies) == ["deleted-record-back"] and "#1" in str(anomalies[0])
    concurrent = [w(0, "a", 0, 1), d(1, 2, 4), w(2, "b", 3, 5, INFO)]
    assert check_registers(concurrent, {"r": [Copy("USA", "b")]}) == []
    assert check_registers(concurrent, {}) == []


def test_a_record_in_two_regions_or_the_wrong_region_is_an_anomaly():
    ops = [w(0, "a", 0, 1, region="USA"), w(1, "b", 2, 3, region="DEU")]
    assert check_registers(ops, {"r": [Copy("DEU", "b")]}) == []
    assert kinds(check_registers(ops, {"r": [Copy("USA", "b"), Copy("DEU", "b")]})) == [
        "duplicate-record",
        "wrong-region",
    ]
    assert kinds(check_registers(ops, {"r": [Copy("USA", "b")]})) == ["wrong-region"]
    assert kinds(check_registers(ops, {"r": [Copy("DEU", "b", chunks=2, generations=2)]})) == ["mixed-generations"]


def test_a_value_nobody_wrote_is_a_phantom():
    assert kinds(check_registers([w(0, "a", 0, 1)], {"r": [Copy("USA", "zzz")]})) == ["phantom-value"]


# -- messages ----------------------------------------------------------------------------------


def m(index: int, text: str, outcome: str, message_id: str = "") -> Op:
    return op(index, MESSAGE, "mem-1", text, 0, 1, outcome, detail=message_id)


def test_every_acknowledged_message_is_stored_and_indexed_once():
    ops = [m(0, "hello", OK, "m0"), m(1, "maybe", INFO), m(2, "refused", FAIL)]
    good = check_messages(ops, {"hello": ["m0"]}, {"m0": [Copy("USA", "hello")]}, {"m0": 1})
    assert good == []
    assert kinds(check_messages(ops, {}, {}, {})) == ["message-lost"]
    assert kinds(check_messages(ops, {"hello": ["m0", "m9"]}, {"m0": [Copy("USA", "x")]}, {})) == [
        "message-duplicated",
        "bridge-missing",
    ]
    assert kinds(check_messages(ops, {"hello": ["m0"]}, {"m0": [Copy("USA", "x"), Copy("DEU", "x")]}, {})) == [
        "bridge-duplicated"
    ]
    assert kinds(check_messages(ops, {"hello": ["m0"]}, {"m0": [Copy("USA", "x")]}, {"m0": 0})) == ["search-not-once"]
    assert kinds(
        check_messages(
            ops, {"hello": ["m0"], "refused": ["m2"]}, {"m0": [Copy("USA", "x")], "m2": [Copy("USA", "r")]}, {}
        )
    ) == ["failed-message-applied"]
    assert (
        check_messages(
            ops, {"hello": ["m0"], "maybe": ["m1"]}, {"m0": [Copy("USA", "x")], "m1": [Copy("USA", "y")]}, {}
        )
        == []
    )


# -- agentic -----------------------------------------------------------------------------------


def test_an_infer_add_runs_exactly_once():
    ops = [op(0, AGENTIC_ADD, "c", "t0", 0, 1, OK, detail="w0"), op(1, AGENTIC_ADD, "c", "t1", 0, 1, INFO)]
    once = {"t0": 1}
    assert check_agentic(ops, {"t0": ["w0"]}, once, once, {}) == []
    assert check_agentic(ops, {"t0": ["w0"], "t1": ["w1"]}, {"t0": 1, "t1": 1}, {"t0": 1, "t1": 1}, {"t1": 1}) == []
    assert kinds(check_agentic(ops, {"t0": ["w0"]}, {"t0": 2}, {"t0": 2}, {})) == ["infer-not-once", "llm-not-once"]
    assert kinds(check_agentic(ops, {"t0": ["w0"]}, once, once, {"t0": 2})) == ["llm-not-once"]
    assert kinds(check_agentic(ops, {"t0": ["w0"], "t1": ["w1"]}, {"t0": 1, "t1": 2}, {"t0": 1, "t1": 2}, {})) == [
        "infer-twice"
    ]
    assert kinds(check_agentic(ops, {}, {}, {}, {})) == ["working-not-once", "infer-not-once", "llm-not-once"]


def test_a_deleted_working_memory_stays_deleted_and_its_fact_is_forgotten():
    ops = [op(0, AGENTIC_ADD, "c", "t0", 0, 1, OK, detail="w0"), op(1, AGENTIC_DELETE, "w0", "t0", 2, 3, OK)]
    once = {"t0": 1}
    assert check_agentic(ops, {}, {}, once, {}) == []
    assert check_agentic(ops, {}, {}, {}, {}) == []  # deleted before its job ran: no LLM call at all
    assert kinds(check_agentic(ops, {"t0": ["w0"]}, {}, once, {})) == ["deleted-memory-back"]
    assert kinds(check_agentic(ops, {}, once, once, {})) == ["forgotten-fact-back"]
    assert kinds(check_agentic(ops, {}, {}, {"t0": 2}, {})) == ["llm-not-once"]
    unknown = [ops[0], op(1, AGENTIC_DELETE, "w0", "t0", 2, 3, INFO)]  # the delete may or may not have happened
    assert check_agentic(unknown, {}, {}, once, {}) == check_agentic(unknown, {}, once, once, {}) == []
    assert kinds(check_agentic(unknown, {}, {"t0": 2}, {"t0": 2}, {})) == ["infer-not-once", "llm-not-once"]


def test_queues_and_views():
    assert check_drained({"outbox": 0, "jobs": 0}) == []
    assert kinds(check_drained({"outbox": 3, "jobs": 0})) == ["not-drained"]
    same = {"r": [Copy("USA", "a")]}
    assert check_views_agree(same, same) == []
    assert kinds(check_views_agree(same, {})) == ["views-differ"]


def test_the_history_is_written_as_json_lines_and_reported(tmp_path: Path):
    history = History()
    first = history.invoke(1, WRITE, "r", "a", server=2, region="USA")
    history.complete(first, OK, 201)
    history.note("kill", server=2)
    second = history.invoke(2, DELETE, "r", None, server=0)
    history.complete(second, INFO, detail="timeout")
    path = history.write_jsonl(tmp_path / "history.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["nemesis"]["event"] == "kill" and lines[1]["outcome"] == OK and lines[2]["outcome"] == INFO
    text = report(check_registers(history.ops, {"r": [Copy("DEU", "a")]}), history, path)
    assert text.startswith("1 anomalies {'wrong-region': 1}") and "#0 p1/s2 write r@USA 'a' ok(201)" in text


def test_a_run_interrupted_by_a_kill_may_call_the_llm_once_more():
    ops = [op(0, AGENTIC_ADD, "c", "t0", 0, 1, OK, detail="w0")]
    assert check_agentic(ops, {"t0": ["w0"]}, {"t0": 1}, {"t0": 2}, {}, {"t0": 1}) == []
    assert kinds(check_agentic(ops, {"t0": ["w0"]}, {"t0": 1}, {"t0": 2}, {}, {})) == ["llm-not-once"]
    assert kinds(check_agentic(ops, {"t0": ["w0"]}, {"t0": 1}, {"t0": 3}, {}, {"t0": 1})) == ["llm-not-once"]
