"""What the agentic services answer, typed; ``views`` renders each as ml-commons' JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_plugin.agentic.stores.base import StoredDoc


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
