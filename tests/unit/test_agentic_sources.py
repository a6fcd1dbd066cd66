"""The forgetting rule (``agentic/stores/sources.py``) on its own: which long-term memories go, which stay and
with what text, and which history entries are deleted or redacted."""

from __future__ import annotations

from typing import Any

from memory_plugin.agentic.stores.base import LongTermChange
from memory_plugin.agentic.stores.sources import REDACTED, SOURCES, plan, source_entry, with_update_source


def memory(text: str, *sources: tuple[str, str]) -> dict[str, Any]:
    return {"memory": text, SOURCES: [source_entry(working, "s", written) for working, written in sources]}


def entry(memory_id: str, working: str, before: str | None = None, after: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"memory_id": memory_id, SOURCES: [source_entry(working, "s")]}
    if before is not None:
        doc["before"] = {"memory": before}
    if after is not None:
        doc["after"] = {"memory": after}
    return doc


def test_a_memory_of_forgotten_sources_only_is_deleted_with_its_whole_history():
    decided = plan(
        {"w1", "w2"},
        [("m", memory("tea", ("w1", "tea"), ("w2", "tea")))],
        [("h1", entry("m", "w1", after="tea")), ("h2", entry("m", "w3", before="tea", after="tea"))],
    )
    assert decided.delete_long_term == ["m"] and decided.rewrite_long_term == {}
    assert sorted(decided.delete_history) == ["h1", "h2"]


def test_a_memory_with_a_source_left_is_kept_and_rolls_back_only_if_the_forgotten_one_wrote_its_text():
    doc = memory("tea with honey", ("w1", "tea"), ("w2", "tea with honey"))
    history = [("h1", entry("m", "w1", after="tea")), ("h2", entry("m", "w2", before="tea", after="tea with honey"))]
    last_goes = plan({"w2"}, [("m", doc)], history)
    assert last_goes.rewrite_long_term["m"]["memory"] == "tea"
    assert [e["working_memory_id"] for e in last_goes.rewrite_long_term["m"][SOURCES]] == ["w1"]
    assert last_goes.delete_history == ["h2"] and last_goes.rewrite_history == {}

    first_goes = plan({"w1"}, [("m", doc)], history)
    assert first_goes.rewrite_long_term["m"]["memory"] == "tea with honey"
    assert first_goes.delete_history == ["h1"]
    assert first_goes.rewrite_history["h2"]["before"] == {"memory": REDACTED}
    assert first_goes.rewrite_history["h2"]["after"] == {"memory": "tea with honey"}

    edited = plan({"w2"}, [("m", {**doc, "memory": "edited by hand"})], history)
    assert edited.rewrite_long_term["m"]["memory"] == "edited by hand"  # a manual edit is not undone


def test_a_memory_without_recorded_sources_keeps_its_old_text_as_of_unknown_origin():
    change = LongTermChange("UPDATE", "m", memory="tea and Oslo", source=source_entry("w9", "s"))
    updated = change.applied_to({"memory": "tea"})
    assert updated["memory"] == "tea and Oslo"
    assert [(e["working_memory_id"], e["memory"]) for e in updated[SOURCES]] == [("", "tea"), ("w9", "tea and Oslo")]
    decided = plan({"w9"}, [("m", updated)], [])
    assert decided.rewrite_long_term["m"]["memory"] == "tea"  # the unknown origin is never forgotten
    # a run updating the same memory twice keeps one entry, at the end
    twice = with_update_source(updated, source_entry("w9", "s"), "tea, Oslo, bikes")
    assert [e["working_memory_id"] for e in twice[SOURCES]] == ["", "w9"]


def test_nothing_cites_nothing():
    decided = plan({"w1"}, [("m", memory("tea", ("w2", "tea")))], [("h", entry("m", "w2", after="tea"))])
    assert decided.delete_long_term == [] and decided.rewrite_long_term == {} and decided.delete_history == []
