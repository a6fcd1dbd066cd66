"""Typed results of the public API, read from the wire answers the agentic and ML services give.

Those services answer in OpenSearch's JSON shapes (the HTTP routes send them as they are); the
readers here are the one place that turns them into dataclasses for Python callers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from memory_plugin.agentic import results as agentic
from memory_plugin.agentic.stores.sources import Forgotten

#: What a write did to its document, as OpenSearch reports it.
WriteResult = Literal["created", "updated", "deleted", "noop", "not_found"]
#: The four kinds of agentic memory a container may hold.
MemoryType = Literal["sessions", "working", "long-term", "history"]


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One hit of a query DSL search: the document's id, score and ``_source``."""

    id: str
    score: float | None
    source: dict[str, Any]
    version: int | None = None


@dataclass(frozen=True, slots=True)
class SearchHits:
    """A query DSL search's answer: its hits in order, the total (None when not tracked), aggregations."""

    total: int | None
    max_score: float | None
    hits: list[SearchHit]
    timed_out: bool = False
    aggregations: dict[str, Any] | None = None

    @classmethod
    def of(cls, response: Mapping[str, Any]) -> SearchHits:
        found = response["hits"]
        total = found.get("total")
        hits = [
            SearchHit(hit["_id"], hit.get("_score"), dict(hit.get("_source") or {}), hit.get("_version"))
            for hit in found["hits"]
        ]
        return cls(
            total=total.get("value") if isinstance(total, Mapping) else total,
            max_score=found.get("max_score"),
            hits=hits,
            timed_out=bool(response.get("timed_out", False)),
            aggregations=response.get("aggregations"),
        )


@dataclass(frozen=True, slots=True)
class Written:
    """A write as OpenSearch reports it: which document, its version, and what happened to it."""

    id: str
    index: str
    version: int
    result: WriteResult

    @classmethod
    def of(cls, response: Mapping[str, Any]) -> Written:
        return cls(response["_id"], response["_index"], response["_version"], response["result"])

    @classmethod
    def of_write(cls, written: agentic.Written) -> Written:
        """An agentic service's write, as its response reports it."""
        return cls(written.doc.id, written.index, written.doc.version, cast(WriteResult, written.result))


@dataclass(frozen=True, slots=True)
class Deleted:
    """An agentic memory deleted, and what forgetting removed with it (empty unless it cascaded)."""

    written: Written
    forgotten: Forgotten = field(default_factory=Forgotten)

    @classmethod
    def of(cls, deleted: agentic.DeletedMemory) -> Deleted:
        return cls(Written.of_write(deleted.written), deleted.forgotten or Forgotten())


@dataclass(frozen=True, slots=True)
class DeletedByQuery:
    """A delete by query: how many documents matched, how many went, and whether the query ran out of time."""

    total: int
    deleted: int
    timed_out: bool

    @classmethod
    def of(cls, done: agentic.DeletedByQuery) -> DeletedByQuery:
        return cls(done.matched, done.deleted, done.timed_out)


@dataclass(frozen=True, slots=True)
class MemoryContainer:
    """A memory container as its owner reads it; ``configuration`` is ml-commons' (strategies, models, …)."""

    id: str
    name: str
    description: str | None
    owner: str | None
    backend_roles: list[str]
    configuration: dict[str, Any]
    created_time: int
    last_updated_time: int

    @classmethod
    def of(cls, container_id: str, view: Mapping[str, Any]) -> MemoryContainer:
        """From ml-commons' view of a container (``views.container_view``)."""
        owner = view.get("owner")
        return cls(
            id=container_id,
            name=view["name"],
            description=view.get("description"),
            owner=owner.get("name") if isinstance(owner, Mapping) else owner,
            backend_roles=list(view.get("backend_roles") or ()),
            configuration=dict(view.get("configuration") or {}),
            created_time=view["created_time"],
            last_updated_time=view["last_updated_time"],
        )


@dataclass(frozen=True, slots=True)
class AgenticDocument:
    """One agentic memory of any type, as get shows it; the properties read the fields most callers want."""

    id: str
    memory_type: MemoryType
    source: dict[str, Any]

    @property
    def memory(self) -> str | None:
        """A long-term memory's fact (or a session's summary)."""
        text = self.source.get("memory", self.source.get("summary"))
        return text if isinstance(text, str) else None

    @property
    def namespace(self) -> dict[str, str]:
        return dict(self.source.get("namespace") or {})

    @property
    def tags(self) -> dict[str, str]:
        return dict(self.source.get("tags") or {})

    @property
    def sources(self) -> list[dict[str, Any]]:
        """The working memories an infer run wrote this from (with ``sources=True`` on get)."""
        return list(self.source.get("memory_sources") or ())


@dataclass(frozen=True, slots=True)
class Added:
    """What an add wrote: its working memory, and the session it went into (None with sessions disabled)."""

    working_memory_id: str
    session_id: str | None


@dataclass(frozen=True, slots=True)
class SessionCreated:
    session_id: str
    #: False when a session of that id existed already (the call then changed nothing).
    created: bool


@dataclass(frozen=True, slots=True)
class ScoredMemory:
    """A long-term memory found by semantic or hybrid search."""

    id: str
    score: float
    memory: str
    namespace: dict[str, str]
    tags: dict[str, str]
    strategy_type: str | None
    source: dict[str, Any]

    @classmethod
    def of(cls, hit: SearchHit) -> ScoredMemory:
        source = hit.source
        return cls(
            id=hit.id,
            score=hit.score or 0.0,
            memory=str(source.get("memory", "")),
            namespace=dict(source.get("namespace") or {}),
            tags=dict(source.get("tags") or {}),
            strategy_type=source.get("strategy_type"),
            source=source,
        )


@dataclass(frozen=True, slots=True)
class Registered:
    """A registered model, and its (completed) register task."""

    model_id: str
    task_id: str
