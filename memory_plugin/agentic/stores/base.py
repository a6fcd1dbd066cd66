"""What every agentic store is: the interface, and the rules both stores share.

Every method names its owner (organisation and user) and, below containers,
the container: a row of anyone else is treated as absent, so no query the
service builds can reach another principal's data.  Both stores (``sqlite`` and
``opensearch``) keep the owner as ``owner_key``, and take from here how a
session touch and an infer UPDATE change a doc, when a long-term doc is
embedded again, its text, and the unit vector stored.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_plugin.agentic.models import LONG_TERM
from memory_plugin.agentic.stores.sources import Forgotten, with_update_source
from memory_plugin.auth import Principal
from memory_plugin.leases import Lease

#: An update's read-merge-write, as a function of the doc it merges into (as reads show it) to the doc written.
#: A store calls it on the doc as stored at the write, again if another write got in between (OpenSearch), so
#: it must have no effects; what it raises fails the update, with nothing written.
Merge = Callable[[dict[str, Any]], dict[str, Any]]


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

    def touched(self, current: Mapping[str, Any]) -> dict[str, Any]:
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


class AgenticStore(abc.ABC):
    """What the agentic memory service needs from a store."""

    #: Other server processes drain the same queues (OpenSearch): the workers poll, since those processes'
    #: writes wake nobody here, and take each entry with a lease.  SQLite belongs to one process.
    shared: bool = False

    @abc.abstractmethod
    async def open(self, dimension: int) -> None:
        """``dimension``: the built-in model's; a container with a remote embedding model has its own."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    # containers
    @abc.abstractmethod
    async def insert_container(self, owner: Principal, container_id: str, doc: dict[str, Any]) -> StoredDoc | None:
        """None when the id is taken."""

    @abc.abstractmethod
    async def get_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        """The container if ``owner`` may use it (``may_use``), with its ``owner`` set."""

    @abc.abstractmethod
    async def find_container(self, organization_id: str, container_id: str) -> StoredDoc | None:
        """The organisation's container, whoever owns it: for background work, whose access was checked when
        it was queued, and for a write's check that the container still exists."""

    @abc.abstractmethod
    async def update_container(self, owner: Principal, container_id: str, merge: Merge) -> StoredDoc | None:
        """Merge an update into a container ``owner`` may use (it keeps its owner), as stored when it is
        written: a concurrent update is never lost (``Merge``)."""

    @abc.abstractmethod
    async def delete_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        """Delete the container with all its memories and pending work."""

    @abc.abstractmethod
    async def containers(self, owner: Principal) -> list[StoredDoc]:
        """The containers ``owner`` owns."""

    @abc.abstractmethod
    async def usable_containers(self, caller: Principal) -> list[StoredDoc]:
        """Every container ``caller`` may use (``may_use``), selected by the store's own query."""

    # memories
    @abc.abstractmethod
    async def add_memory(self, owner: Principal, container_id: str, add: MemoryAdd) -> bool:
        """The working doc, its session and its infer job, in one transaction; False, and nothing written, when
        the owner's container is gone (deleted since the caller read it: its memories would be unreachable)."""

    @abc.abstractmethod
    async def create_session(
        self, owner: Principal, container_id: str, session_id: str, doc: dict[str, Any]
    ) -> bool | None:
        """False when the session id exists already; None, and nothing written, when the container is gone."""

    @abc.abstractmethod
    async def get(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> StoredDoc | None: ...

    @abc.abstractmethod
    async def sources(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str
    ) -> list[dict[str, Any]] | None:
        """The hidden ``memory_sources`` of a long-term or history doc (``[]`` when it has none), None when the
        doc is not found: what the console shows as the working memories a fact came from."""

    @abc.abstractmethod
    async def update(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str, merge: Merge
    ) -> StoredDoc | None:
        """Merge an update into a doc as stored when it is written, so that a concurrent update is never lost
        (``Merge``); a long-term one whose text changed is embedded again."""

    async def replace(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str, doc: dict[str, Any]
    ) -> StoredDoc | None:
        """Re-index a doc whole (its hidden fields kept)."""
        return await self.update(owner, container_id, memory_type, memory_id, lambda _current: doc)

    @abc.abstractmethod
    async def delete(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str
    ) -> StoredDoc | None: ...

    @abc.abstractmethod
    async def docs(self, owner: Principal, container_id: str, memory_type: str) -> list[StoredDoc]:
        """Every doc of a type in the container, oldest first (for query evaluation)."""

    @abc.abstractmethod
    async def delete_ids(self, owner: Principal, container_id: str, memory_type: str, ids: Sequence[str]) -> int: ...

    @abc.abstractmethod
    async def forget(self, owner: Principal, container_id: str, working_ids: Sequence[str]) -> Forgotten:
        """Forget these working memories by the rule of ``sources``: their queued infer jobs, the long-term
        memories inferred from them and the history quoting them, then the working docs themselves.
        Idempotent: forgetting ids already forgotten (or never there) finds the rest of the work, or none."""

    @abc.abstractmethod
    async def embeddings(self, owner: Principal, container_id: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """``memory_embedding`` of long-term docs, for the answers that show it."""

    # background work
    @abc.abstractmethod
    async def pending_embeddings(self, limit: int, skip: Iterable[str] = ()) -> list[PendingEmbedding]:
        """Long-term docs waiting for their embedding, oldest first, outside the containers in ``skip``
        (whose model failed just now: they must not hold up everyone else's).  A shared store returns
        only those this process has just claimed."""

    async def release_embeddings(self, entries: Sequence[PendingEmbedding]) -> None:
        """Give claimed embeddings back (their model failed): anyone may try them again at once."""
        return None  # nothing is claimed in a store of one process

    @abc.abstractmethod
    async def store_embeddings(self, rows: Sequence[tuple[Any, str, np.ndarray]]) -> int:
        """Store vectors for texts that are still current; returns how many were stored."""

    @abc.abstractmethod
    async def pending_count(self) -> int: ...

    @abc.abstractmethod
    async def infer_job_count(self) -> int:
        """Infer jobs queued and not yet applied, held or not: the backlog health and metrics show."""

    @abc.abstractmethod
    async def infer_jobs(self, limit: int) -> list[InferJob]:
        """The oldest queued jobs, held by anyone or no one (a look: nothing is claimed)."""

    async def claim_infer_jobs(self, limit: int) -> list[InferJob]:
        """Up to ``limit`` of the oldest jobs nobody holds, now held by this process."""
        return await self.infer_jobs(limit)

    async def renew_infer_job(self, job: InferJob) -> bool:
        """Extend this process's hold on a job before the next slow step; False if another process took it."""
        return True

    @abc.abstractmethod
    async def apply_infer(
        self, job: InferJob, changes: Sequence[LongTermChange], history: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        """Apply an infer run's changes and history and drop its job, all in one transaction; nothing if the job
        is gone (applied already) or held by another process.  Applying the same run twice changes nothing."""

    @abc.abstractmethod
    async def keep_infer_answers(self, job: InferJob) -> bool:
        """Store ``job.answers`` with the job, durably, before the run goes on: a run that fails after an LLM
        call is retried with its answer, not with another call.  False, and nothing written, if another
        process holds the job now."""

    @abc.abstractmethod
    async def count_infer_attempt(self, job: InferJob) -> None:
        """Count a failed run of a job we hold, and give it back to be tried again."""

    # search
    @abc.abstractmethod
    async def knn(self, scope: LongTermScope, vector: np.ndarray, k: int) -> list[tuple[StoredDoc, float]]:
        """Top ``k`` docs of the scope by cosine."""

    @abc.abstractmethod
    async def bm25(self, scope: LongTermScope, query: str, k: int) -> list[tuple[StoredDoc, float]]:
        """Top ``k`` docs of the scope by BM25 on ``memory``."""
