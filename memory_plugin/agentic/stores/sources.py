"""Where a long-term memory came from, and what forgetting a source does to it and to the history quoting it.

Every long-term memory an infer run ADDs or UPDATEs records its sources in a hidden field,
``memory_sources``: one entry per working memory that wrote it, ``{working_memory_id, session_id, memory}``
(``memory``: the text that run left), oldest first.  A memory that had no recorded source when a run updated
it (written before sources were kept) gets an entry of unknown origin (empty id) holding its old text, which no
deletion ever removes.  History entries a run writes record the run's source the same way (without text).  Both
stores keep the field out of every answer (ml-commons' long-term and history documents have no such field).

**The rule** when working memories are forgotten (deleted with their session, or with their user):

1. A long-term memory all of whose sources are forgotten is deleted.
2. One with a source left is kept, without the forgotten sources.  If its text is the one a forgotten source
   wrote (that run was the last to change it, and nobody edited it since), the text rolls back to what the
   newest remaining source wrote; otherwise it stays (a later run's text may still carry a detail from the
   forgotten message: re-deriving it would need the LLM again, which this rule does not call).
3. History entries written by a forgotten source's run are deleted, and so are all entries of a deleted memory;
   entries of a kept memory that quote a text only a forgotten source wrote have that text replaced by
   ``REDACTED``.

Planning is pure (this module); each store applies the plan (SQLite in one transaction, OpenSearch step by
step, idempotently: running it again finds nothing left to do).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The hidden field of long-term and history docs.
SOURCES = "memory_sources"
#: What a history entry shows in place of a text it quoted from a forgotten message.
REDACTED = "[forgotten]"


def source_entry(working_id: str, session_id: str | None, memory: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"working_memory_id": working_id, "session_id": session_id or ""}
    if memory is not None:
        entry["memory"] = memory
    return entry


def sources_of(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = doc.get(SOURCES)
    return [entry for entry in raw if isinstance(entry, dict)] if isinstance(raw, list) else []


def source_ids(doc: Mapping[str, Any]) -> set[str]:
    return {str(entry.get("working_memory_id", "")) for entry in sources_of(doc)}


def without_sources(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` as answers show it."""
    return {key: value for key, value in doc.items() if key != SOURCES}


def with_update_source(current: Mapping[str, Any], entry: Mapping[str, Any] | None, text: str | None) -> dict[str, Any]:
    """The sources of ``current`` after an infer UPDATE by ``entry``'s run wrote ``text``: the run's entry moves
    to the end with the new text; a memory with no recorded source keeps its old text as of unknown origin."""
    if entry is None:
        return dict(current)
    sources = sources_of(current)
    if not sources:
        sources = [source_entry("", "", str(current.get("memory", "")))]
    working_id = entry.get("working_memory_id")
    sources = [old for old in sources if old.get("working_memory_id") != working_id or not working_id]
    return {**current, SOURCES: [*sources, {**entry, "memory": text}]}


@dataclass
class Forgotten:
    """What forgetting removed: the erasure report."""

    working: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    long_term_deleted: list[str] = field(default_factory=list)
    long_term_kept: list[str] = field(default_factory=list)
    history_deleted: list[str] = field(default_factory=list)
    history_redacted: list[str] = field(default_factory=list)
    infer_jobs_deleted: int = 0

    def add(self, other: Forgotten) -> Forgotten:
        for name in ("working", "sessions", "long_term_deleted", "long_term_kept", "history_deleted"):
            mine = getattr(self, name)
            mine += [item for item in getattr(other, name) if item not in mine]
        self.history_redacted += [item for item in other.history_redacted if item not in self.history_redacted]
        self.infer_jobs_deleted += other.infer_jobs_deleted
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "working_memories": sorted(self.working),
            "sessions": sorted(self.sessions),
            "long_term_deleted": sorted(self.long_term_deleted),
            "long_term_kept": sorted(self.long_term_kept),
            "history_deleted": sorted(self.history_deleted),
            "history_redacted": sorted(self.history_redacted),
            "infer_jobs_deleted": self.infer_jobs_deleted,
        }


@dataclass
class Plan:
    """What a store writes to forget some working memories."""

    delete_long_term: list[str] = field(default_factory=list)
    #: id -> the kept memory's new doc (raw, with its remaining sources)
    rewrite_long_term: dict[str, dict[str, Any]] = field(default_factory=dict)
    delete_history: list[str] = field(default_factory=list)
    rewrite_history: dict[str, dict[str, Any]] = field(default_factory=dict)

    def report(self, working: Iterable[str], jobs: int) -> Forgotten:
        return Forgotten(
            working=sorted(set(working)),
            long_term_deleted=sorted(self.delete_long_term),
            long_term_kept=sorted(self.rewrite_long_term),
            history_deleted=sorted(self.delete_history),
            history_redacted=sorted(self.rewrite_history),
            infer_jobs_deleted=jobs,
        )


def plan(
    gone: set[str], long_term: Sequence[tuple[str, dict[str, Any]]], history: Sequence[tuple[str, dict[str, Any]]]
) -> Plan:
    """Apply the rule to the raw long-term docs citing a ``gone`` source and the raw history entries that
    cite one or concern one of those memories."""
    out = Plan()
    quoted: set[str] = set()
    for memory_id, doc in long_term:
        sources = sources_of(doc)
        forgotten = [entry for entry in sources if entry.get("working_memory_id") in gone]
        if not forgotten:
            continue
        kept = [entry for entry in sources if entry.get("working_memory_id") not in gone]
        quoted |= {str(entry["memory"]) for entry in forgotten if "memory" in entry}
        if not kept:
            out.delete_long_term.append(memory_id)
            continue
        new = {**doc, SOURCES: kept}
        last = forgotten[-1]
        if sources[-1] is last and doc.get("memory") == last.get("memory") and "memory" in kept[-1]:
            new["memory"] = kept[-1]["memory"]  # the forgotten run wrote the current text: roll it back
        out.rewrite_long_term[memory_id] = new
    kept_texts = {str(doc.get("memory")) for doc in out.rewrite_long_term.values()}
    kept_texts |= {str(entry.get("memory")) for doc in out.rewrite_long_term.values() for entry in sources_of(doc)}
    quoted -= kept_texts  # a text a remaining source also wrote is not only the forgotten one's
    deleted = set(out.delete_long_term)
    for history_id, doc in history:
        if source_ids(doc) & gone or doc.get("memory_id") in deleted:
            out.delete_history.append(history_id)
            continue
        if doc.get("memory_id") not in out.rewrite_long_term:
            continue
        new = dict(doc)
        for side in ("before", "after"):
            part = doc.get(side)
            if isinstance(part, dict) and part.get("memory") in quoted:
                new[side] = {**part, "memory": REDACTED}
        if new != doc:
            out.rewrite_history[history_id] = new
    return out
