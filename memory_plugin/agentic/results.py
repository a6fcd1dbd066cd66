"""What the agentic services answer, typed; ``views`` renders each as ml-commons' JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_plugin.agentic.requests import JsonObject
from memory_plugin.agentic.stores.base import StoredDoc
from memory_plugin.agentic.stores.sources import Forgotten
from memory_plugin.dsl import DocumentResults


@dataclass(frozen=True, slots=True)
class ContainerCreated:
    container_id: str


@dataclass(frozen=True, slots=True)
class Written:
    """A document a write left in ``index`` (``result``: ``updated`` or ``deleted``), as OpenSearch reports it."""

    index: str
    doc: StoredDoc
    result: str
    #: False: the answer leaves ``forced_refresh`` out, as ml-commons' update of a container does.
    forced_refresh: bool = True


@dataclass(frozen=True, slots=True)
class Hits:
    """A query DSL search over stored docs: its results, and the docs searched, whose versions the hits show."""

    index: str
    results: DocumentResults
    took: int
    docs: Sequence[StoredDoc] = ()


@dataclass(frozen=True, slots=True)
class AddMemoriesResult:
    """What an add wrote: its working memory, and the session it named, created or touched (if any)."""

    working_memory_id: str
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class RankedMemories:
    """A semantic or hybrid search's long-term memories, best first, with their scores."""

    index: str
    scored: Sequence[tuple[StoredDoc, float]]
    #: Hits below it are left out of the answer.
    min_score: float | None
    #: The ``filter``'s evaluation ran out of budget: only the docs it examined could be found.
    timed_out: bool
    took: int


@dataclass(frozen=True, slots=True)
class SessionCreated:
    session_id: str
    #: False: a session of that id existed already.
    created: bool


@dataclass(frozen=True, slots=True)
class FoundMemory:
    """One memory as get found it: long-term with its embedding, and the sources asked for (``?sources=true``)."""

    memory_type: str
    doc: StoredDoc
    embedding: list[float] | None = None
    sources: list[JsonObject] | None = None


@dataclass(frozen=True, slots=True)
class DeletedMemory:
    """A memory's delete, and what forgetting removed with it (reported when asked for)."""

    written: Written
    forgotten: Forgotten | None = None


@dataclass(frozen=True, slots=True)
class DeletedByQuery:
    took: int
    timed_out: bool
    matched: int
    deleted: int
