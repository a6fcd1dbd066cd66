"""What both agentic stores share: the records their capabilities take and return, and the rules they follow.

The capabilities are in modules of their own (``backend`` lists them).  Every
method names its owner (organisation and user) and, below containers, the
container: a row of anyone else is treated as absent, so no query the service
builds can reach another principal's data.  Both stores (``sqlite`` and
``opensearch``) keep the owner as ``owner_key``, and take from here how a
session touch and an infer UPDATE change a doc, when a long-term doc is
embedded again, its text, and the unit vector stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_plugin.agentic.models import LONG_TERM
from memory_plugin.agentic.stores.sources import with_update_source
from memory_plugin.auth import Principal
from memory_plugin.leases import Lease

#: An update's read-merge-write, as a function of the doc it merges into (as reads show it) to the doc written.
#: A store calls it on the doc as stored at the write, again if another write got in between (OpenSearch), so
#: it must have no effects; what it raises fails the update, with nothing written.
Merge = Callable[[dict[str, Any]], dict[str, Any]]
#: What every match of a query holds (``dsl.pushdown.RequiredTerms``): for each pair, one of its values at one of
#: its paths; a store with postings selects candidates by them.
ExactTerms = Sequence[tuple[Sequence[str], Sequence[str]]]


@dataclass(frozen=True)
class StoredDoc:
    id: str
    source: dict[str, Any]
    version: int = 1
    seq_no: int = 0
    seq: int = 0
    #: A container's owner, as container reads return it (a container may be used by others: see ``may_use``).
    owner: Principal | None = field(default=None, compare=False)


@dataclass(frozen=True)
class InferJob:
    """An inferring add waiting for its LLM work: applied whole, or not at all."""

    job_id: int | str
    owner: Principal
    container_id: str
    request: dict[str, Any]
    attempts: int = 0
    #: This process's hold on the job, where several processes share the queue (OpenSearch).
    lease: Lease | None = field(default=None, compare=False)
    #: The LLM's answers of earlier tries, by step (``keep_infer_answers``): a retry reuses them.
    answers: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class LongTermChange:
    """One decision of an infer run: ADD a doc, UPDATE an id's memory text, or DELETE an id."""

    event: str
    memory_id: str
    doc: dict[str, Any] | None = None
    memory: str | None = None
    last_updated_time: int = 0
    #: The run's source (``sources.source_entry``), recorded on the memories it ADDs and UPDATEs.
    source: Mapping[str, Any] | None = None

    def applied_to(self, current: Mapping[str, Any]) -> dict[str, Any]:
        """An UPDATE's new version of the raw ``current`` doc, its sources merged with the run's."""
        merged = with_update_source(current, self.source, self.memory)
        return {**merged, "memory": self.memory, "last_updated_time": self.last_updated_time}


@dataclass
class SessionWrite:
    """The session an add creates (``doc`` set) or touches (bumps ``last_updated_time``)."""

    session_id: str
    doc: dict[str, Any] | None
    touched_time: int = 0
    created: bool = field(default=False)

    @property
    def drawn(self) -> bool:
        """The service drew the id for this add: there is nothing to touch, and no other session holds it."""
        return self.doc is not None and not self.touched_time

    def touched(self, current: Mapping[str, Any]) -> dict[str, Any]:
        """``current`` with nothing else changed (no posting holds ``last_updated_time``)."""
        return {**current, "last_updated_time": self.touched_time}


@dataclass(frozen=True)
class MemoryAdd:
    """What one add writes, all in one transaction: its working doc, the session it creates or touches, its infer job."""

    working_id: str
    working: dict[str, Any]
    session: SessionWrite | None = None
    infer_request: dict[str, Any] | None = None


@dataclass(frozen=True)
class PendingEmbedding:
    """A long-term doc waiting for its vector: the container names the model that embeds it."""

    key: Any  # the store's own
    owner: Principal
    container_id: str
    text: str
    #: This process's hold on the memory's embedding, where several processes share the queue (OpenSearch).
    lease: Lease | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LongTermScope:
    """The long-term docs a k-NN or BM25 search ranks: the owner's in one container, matching every
    ``(field, value)`` term, and among ``only_ids`` when given."""

    owner: Principal
    container_id: str
    terms: Sequence[tuple[str, str]] = ()
    only_ids: set[str] | None = None

    @property
    def empty(self) -> bool:
        """``only_ids`` rules out every doc."""
        return self.only_ids is not None and not self.only_ids


def owner_id(owner: Principal) -> str:
    """The ``owner_id`` of documents: the key's user (empty for an organisation-wide key)."""
    return owner.user_id or ""


def owner_key(owner: Principal) -> tuple[str, str]:
    """What each store keeps beside a document to scope it: the organisation and the ``owner_id``."""
    return owner.organization_id, owner_id(owner)


def may_use(caller: Principal, organization_id: str, user: str, roles: Iterable[str] | None) -> bool:
    """Whether ``caller`` may read and write a container of ``(organization_id, user)`` shared with ``roles``:
    ml-commons' ``checkMemoryContainerAccess`` inside one organisation.  Its owner, a key of the whole
    organisation (ml-commons' ``all_access``), or a key holding one of its ``backend_roles``; never anyone
    of another organisation.  Memories inside stay their writers' (every memory query is owner-scoped), as
    ml-commons filters them by ``owner_id``."""
    if caller.organization_id != organization_id:
        return False
    if caller.organization_admin or owner_id(caller) == user:
        return True
    return not set(caller.backend_roles).isdisjoint(roles or ())


def owner_of(organization_id: str, user: str) -> Principal:
    """The principal an ``owner_key`` names."""
    return Principal(organization_id, user or None)


def memory_text(doc: Mapping[str, Any]) -> str:
    """A long-term doc's text, as it is embedded."""
    return str(doc.get("memory", ""))


def text_changed(memory_type: str, current: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """A long-term doc whose text changes needs its embedding computed again."""
    return memory_type == LONG_TERM and current.get("memory") != new.get("memory")


def normalised(vector: np.ndarray) -> np.ndarray:
    """``vector`` as float32 of unit length (a zero vector stays zero)."""
    vector = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vector.astype(np.float64)))  # float32 overflows to inf past 1.8e38
    return (vector / norm).astype(np.float32) if norm > 0 else vector
