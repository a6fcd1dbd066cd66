"""A Jepsen-style history of client operations, and the checker that judges it against the final state.

Every operation is recorded twice: when a client invokes it and when its outcome is known.  The outcome is
``ok`` (acknowledged), ``fail`` (definitely not applied: a 4xx, or a connection that was never made) or
``info`` (indeterminate: a timeout, a 5xx, a connection lost mid-request).  An ``info`` operation may take
effect at any time after its invocation, or never; the checker accepts both.

The checks are those a single correct server would pass:

* **registers** (history records): each record id is one register whose writes carry unique values.  The
  final value must be one a linearizable register could end with: the initial absence if no write was
  acknowledged, else the value of a write (or the absence left by a delete) that is not *strictly followed*
  (completed before the other was invoked) by another acknowledged write or delete of the key.  The record
  must be stored once (one region, one generation of chunks) and in the region its winning write named.
* **messages** (memory API + bridge): an acknowledged message is stored once and indexed once as a record.
* **agentic adds**: an acknowledged infer add ran exactly once (one LLM extraction, its fact stored once), an
  indeterminate one at most once; an acknowledged delete of a working memory stays deleted.
* **queues**: outbox and jobs drain to empty.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OK, FAIL, INFO = "ok", "fail", "info"
WRITE, DELETE = "write", "delete"
MESSAGE = "message"
AGENTIC_ADD, AGENTIC_DELETE = "agentic_add", "agentic_delete"
#: A container created for the adds that follow (recorded, not checked: the adds are).
AGENTIC_CONTAINER = "agentic_container"


@dataclass
class Op:
    """One client operation: what was asked, when, and what came back."""

    index: int
    process: int
    kind: str
    key: str
    value: str | None
    invoke: float
    server: int = -1
    complete: float | None = None
    outcome: str | None = None
    status: int | None = None
    #: What the answer named (a message id, a working memory id), or the error.
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> float:
        """When the op's effect happened at the latest: never known for an indeterminate op."""
        return math.inf if self.outcome == INFO or self.complete is None else self.complete

    def short(self) -> str:
        done = "?" if self.complete is None else f"{self.complete:.2f}"
        region = f"@{self.extra['region']}" if "region" in self.extra else ""
        value = f" {self.value!r}" if self.value is not None else ""
        return (
            f"#{self.index} p{self.process}/s{self.server} {self.kind} {self.key}{region}{value} "
            f"{self.outcome}({self.status or self.detail[:40]}) [{self.invoke:.2f}-{done}]"
        )


class History:
    """The log of every op, in invocation order; times in seconds since the history began."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.started = time.monotonic()
        self.events: list[dict[str, Any]] = []

    def now(self) -> float:
        return time.monotonic() - self.started

    def invoke(self, process: int, kind: str, key: str, value: str | None, server: int = -1, **extra: Any) -> Op:
        op = Op(len(self.ops), process, kind, key, value, self.now(), server, extra=dict(extra))
        self.ops.append(op)
        return op

    def complete(self, op: Op, outcome: str, status: int | None = None, detail: str = "") -> Op:
        assert outcome in (OK, FAIL, INFO), outcome
        op.complete, op.outcome, op.status, op.detail = self.now(), outcome, status, detail
        return op

    def note(self, what: str, **details: Any) -> None:
        """A nemesis event (a kill, a pause), kept beside the ops."""
        self.events.append({"time": round(self.now(), 3), "event": what, **details})

    def write_jsonl(self, path: Path) -> Path:
        with path.open("w") as out:
            for event in self.events:
                out.write(json.dumps({"nemesis": event}) + "\n")
            for op in self.ops:
                out.write(json.dumps(asdict(op)) + "\n")
        return path

    def summary(self) -> dict[str, int]:
        return dict(sorted(Counter(f"{op.kind}:{op.outcome}" for op in self.ops).items()))


@dataclass(frozen=True)
class Copy:
    """A record as found in one region: its text (single-chunk texts), how many chunks and generations."""

    region: str
    text: str
    chunks: int = 1
    generations: int = 1


@dataclass(frozen=True)
class Anomaly:
    kind: str
    key: str
    message: str
    ops: tuple[Op, ...] = ()

    def __str__(self) -> str:
        lines = [f"{self.kind} {self.key}: {self.message}"]
        lines += [f"    {op.short()}" for op in self.ops[:8]]
        if len(self.ops) > 8:
            lines.append(f"    ... {len(self.ops) - 8} more ops")
        return "\n".join(lines)


def _strictly_followed(op: Op, acknowledged: Iterable[Op]) -> list[Op]:
    """The acknowledged ops invoked after ``op`` completed (real-time order: they saw its effect)."""
    return [other for other in acknowledged if other is not op and other.invoke > op.end]


def register_candidates(ops: Sequence[Op]) -> list[Op | None]:
    """The ops whose value a register may end with (None: the initial absence), by the last-writer rule."""
    acknowledged = [op for op in ops if op.outcome == OK]
    candidates: list[Op | None] = [] if acknowledged else [None]
    for op in ops:
        if op.outcome != FAIL and not _strictly_followed(op, acknowledged):
            candidates.append(op)
    return candidates


def check_registers(ops: Sequence[Op], final: Mapping[str, Sequence[Copy]]) -> list[Anomaly]:
    """Histories records: final value, uniqueness and region of every key written or deleted."""
    anomalies: list[Anomaly] = []
    by_key: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind in (WRITE, DELETE):
            by_key[op.key].append(op)
    for key in sorted(set(by_key) | set(final)):
        key_ops = by_key.get(key, [])
        copies = list(final.get(key, ()))
        if len(copies) > 1:
            anomalies.append(
                Anomaly("duplicate-record", key, f"stored {len(copies)} times: {_copies(copies)}", tuple(key_ops))
            )
        for copy in copies:
            if copy.generations != 1:
                anomalies.append(
                    Anomaly("mixed-generations", key, f"{copy.region} holds {copy.generations} generations", ())
                )
        candidates = register_candidates(key_ops)
        allowed = {None if c is None or c.kind == DELETE else c.value for c in candidates}
        writes = {op.value: op for op in key_ops if op.kind == WRITE}
        finals = {copy.text for copy in copies} or {None}
        for value in sorted(finals, key=str):
            if value in allowed:
                continue
            winners = [c for c in candidates if c is not None]
            if value is None:
                lost = [c for c in winners if c.kind == WRITE and c.outcome == OK]
                anomalies.append(
                    Anomaly("lost-write", key, "absent, but acknowledged writes could be last", tuple(lost or winners))
                )
                continue
            source = writes.get(value)
            if source is None:
                anomalies.append(Anomaly("phantom-value", key, f"holds {value!r}, which nobody wrote", ()))
            elif source.outcome == FAIL:
                anomalies.append(Anomaly("failed-write-applied", key, f"holds {value!r}", (source,)))
            else:
                followers = _strictly_followed(source, [op for op in key_ops if op.outcome == OK])
                kind = "deleted-record-back" if any(f.kind == DELETE for f in followers) else "stale-value"
                anomalies.append(
                    Anomaly(kind, key, f"holds {value!r}, overwritten by later acknowledged ops", (source, *followers))
                )
        for copy in copies:
            source = writes.get(copy.text)
            if source is not None and copy.region != source.extra.get("region", copy.region):
                anomalies.append(
                    Anomaly(
                        "wrong-region",
                        key,
                        f"{copy.text!r} is in {copy.region}, written to {source.extra['region']}",
                        (source,),
                    )
                )
    return anomalies


def _copies(copies: Sequence[Copy]) -> str:
    return ", ".join(f"{c.region}:{c.text!r}" for c in copies)


def check_messages(
    ops: Sequence[Op],
    stored: Mapping[str, Sequence[str]],
    indexed: Mapping[str, Sequence[Copy]],
    searchable: Mapping[str, int],
) -> list[Anomaly]:
    """Memory messages: ``stored`` maps an input text to the message ids holding it, ``indexed`` a message id
    to its bridge records, ``searchable`` a message id to the hits a server's history search gave for it."""
    anomalies: list[Anomaly] = []
    for op in ops:
        if op.kind != MESSAGE:
            continue
        assert op.value is not None
        ids = list(stored.get(op.value, ()))
        if op.outcome == OK:
            if ids != [op.detail]:
                kind = "message-lost" if not ids else "message-duplicated"
                anomalies.append(Anomaly(kind, op.key, f"stored as {ids}, acknowledged as {op.detail}", (op,)))
        elif op.outcome == INFO and len(ids) > 1:
            anomalies.append(Anomaly("message-duplicated", op.key, f"stored as {ids}", (op,)))
        elif op.outcome == FAIL and ids:
            anomalies.append(Anomaly("failed-message-applied", op.key, f"stored as {ids}", (op,)))
        for message_id in ids:
            records = list(indexed.get(message_id, ()))
            if len(records) != 1 or records[0].generations != 1:
                kind = "bridge-missing" if not records else "bridge-duplicated"
                detail = _copies(records) or "no record"
                anomalies.append(Anomaly(kind, op.key, f"message {message_id}: {detail}", (op,)))
            hits = searchable.get(message_id)
            if hits is not None and hits != 1:
                anomalies.append(
                    Anomaly("search-not-once", op.key, f"message {message_id} found {hits} times by search", (op,))
                )
    return anomalies


def check_agentic(
    ops: Sequence[Op],
    working: Mapping[str, Sequence[str]],
    long_term: Mapping[str, int],
    extractions: Mapping[str, int],
    decisions: Mapping[str, int],
    interrupted: Mapping[str, int] | None = None,
) -> list[Anomaly]:
    """Agentic infer adds (value: the message text) and working-memory deletes (key: the working memory id):
    an add's fact exists once, from one LLM run, until its working memory is deleted; then it is forgotten.

    ``working`` maps a message text to the working memory ids holding it; ``long_term`` a message text to the
    long-term memories extracted from it; ``extractions`` and ``decisions`` a message text to the LLM calls
    the scripted LLM saw for it (fact extraction, and memory decisions whose facts include its fact).
    ``interrupted`` counts the calls made by a process that was later killed: its run may not have been
    applied, so one more run is no duplicate (at-least-once is all a crash allows)."""
    anomalies: list[Anomaly] = []
    deletes: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind == AGENTIC_DELETE:
            deletes[op.key].append(op)
    for op in ops:
        if op.kind != AGENTIC_ADD:
            continue
        assert op.value is not None
        ids, facts = list(working.get(op.value, ())), long_term.get(op.value, 0)
        calls, decided = extractions.get(op.value, 0), decisions.get(op.value, 0)
        runs = 2 if (interrupted or {}).get(op.value) else 1
        if op.outcome == OK:
            removed = [d for d in deletes.get(op.detail, ()) if d.outcome == OK]
            maybe_removed = [d for d in deletes.get(op.detail, ()) if d.outcome == INFO]
            if removed and ids:
                anomalies.append(Anomaly("deleted-memory-back", op.key, f"working {ids}", (op, *removed)))
            elif not removed and not maybe_removed and ids != [op.detail]:
                anomalies.append(Anomaly("working-not-once", op.key, f"working {ids}, acknowledged {op.detail}", (op,)))
            # Deleting a working memory forgets what was inferred from it (agentic/forgetting.py): its job may
            # never run then, and a run that raced the delete is undone.
            if removed and facts:
                anomalies.append(Anomaly("forgotten-fact-back", op.key, f"{facts} long-term memories", (op, *removed)))
            elif not removed and not (facts == 1 or (maybe_removed and facts == 0)):
                anomalies.append(Anomaly("infer-not-once", op.key, f"{facts} long-term memories from it", (op,)))
            fewest = 0 if removed or maybe_removed else 1
            if not fewest <= calls <= runs or decided > runs:
                anomalies.append(Anomaly("llm-not-once", op.key, f"{calls} extractions, {decided} decisions", (op,)))
        elif op.outcome == INFO:
            if len(ids) > 1 or facts > 1 or calls > runs or decided > runs:
                anomalies.append(
                    Anomaly(
                        "infer-twice", op.key, f"working {ids}, {facts} long-term, {calls}+{decided} LLM calls", (op,)
                    )
                )
        elif ids or facts or calls:
            anomalies.append(
                Anomaly("failed-add-applied", op.key, f"working {ids}, {facts} long-term, {calls} calls", (op,))
            )
        if facts > calls:
            anomalies.append(Anomaly("fact-without-llm", op.key, f"{facts} memories from {calls} calls", (op,)))
    return anomalies


def check_drained(queues: Mapping[str, int]) -> list[Anomaly]:
    """Every queue (outbox, jobs, pending embeddings) must be empty once the system is healed and idle."""
    return [Anomaly("not-drained", name, f"{count} entries left", ()) for name, count in queues.items() if count]


def check_views_agree(
    os_view: Mapping[str, Sequence[Copy]], server_view: Mapping[str, Sequence[Copy]]
) -> list[Anomaly]:
    """What a server's search answers about each record is what OpenSearch holds."""
    anomalies = []
    for key in sorted(set(os_view) | set(server_view)):
        stored = sorted((c.region, c.text) for c in os_view.get(key, ()))
        served = sorted((c.region, c.text) for c in server_view.get(key, ()))
        if stored != served:
            anomalies.append(Anomaly("views-differ", key, f"OpenSearch {stored}, server search {served}"))
    return anomalies


def report(anomalies: Sequence[Anomaly], history: History, path: Path | None = None) -> str:
    """The assertion message: counts by kind, then each anomaly with its ops."""
    counts = Counter(a.kind for a in anomalies)
    head = f"{len(anomalies)} anomalies {dict(sorted(counts.items()))}; ops {history.summary()}"
    if path is not None:
        head += f"; history in {path}"
    return "\n".join([head, *(str(a) for a in anomalies)])
