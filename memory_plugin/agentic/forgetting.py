"""Forgetting that cascades: deleting a working memory, a session or a user also deletes what was inferred
from them (issue 27, item 5).  No memory system we compare against does this; ml-commons deletes the one doc.

**The rule** (``stores/sources.py`` applies it, on both stores):

* every long-term memory an infer run ADDs or UPDATEs records its sources, the working memories (and their
  sessions) it was inferred from, in a hidden field no answer shows;
* forgetting a working memory deletes its queued infer job, deletes each long-term memory inferred **only**
  from forgotten working memories, and keeps one with a source left, minus the forgotten source; if the
  forgotten source wrote its current text, the text rolls back to what the newest remaining source wrote.
  It does not re-run the LLM (re-deriving), so a text a later run built on the forgotten one may keep a detail;
* history entries a forgotten source's run wrote, and every entry of a deleted memory, are deleted; entries of
  a kept memory that quote a text only the forgotten source wrote get it replaced by ``[forgotten]``.

What triggers it (with the ``[agentic] forgetting`` setting on, the default; off, deletes are ml-commons'):

* ``DELETE …/memories/working/{id}`` forgets that working memory;
* ``DELETE …/memories/sessions/{id}`` forgets every working memory of the session (ml-commons leaves them);
* ``_delete_by_query`` on ``working`` or ``sessions`` forgets what it matched the same way;
* erasing a user (``DELETE /v2/ai/conversation_histories?filter[user_id]=U``) deletes U's containers whole,
  as before, and in the organisation-wide key's containers forgets U's working memories and deletes the
  sessions, long-term memories and history filed under ``namespace.user_id = U``.

The 2.12 conversational memory API (conversations and their messages) does not feed agentic memory, so
deleting a conversation or a message has nothing to cascade here.

``?report=true`` on a delete adds a ``forgotten`` object (what was removed, by id) to ml-commons' response;
without it the response is ml-commons' exactly.  A cascade cut short (a crash) is finished by deleting again:
the 404 for a working memory or session already gone still runs it.
"""

from __future__ import annotations

import time

from memory_plugin.agentic.containers import Containers
from memory_plugin.agentic.memories import Memories
from memory_plugin.agentic.memory_requests import DeleteByQueryInput
from memory_plugin.agentic.models import HISTORY, LONG_TERM, SESSIONS, WORKING, parse_memory_type
from memory_plugin.agentic.results import DeletedByQuery, DeletedMemory
from memory_plugin.agentic.search import matching_ids
from memory_plugin.agentic.stores.base import StoredDoc
from memory_plugin.agentic.stores.containers import ContainerStore
from memory_plugin.agentic.stores.forgetting import ForgettingStore
from memory_plugin.agentic.stores.memories import MemoryDocStore
from memory_plugin.agentic.stores.sources import Forgotten
from memory_plugin.agentic.views import took
from memory_plugin.auth import Principal
from memory_plugin.background import Worker
from memory_plugin.errors import InvalidArgument, StatusNotFound

CASCADING = (WORKING, SESSIONS)


def _session_of(doc: StoredDoc) -> str | None:
    namespace = doc.source.get("namespace")
    session = doc.source.get("session_id") or (namespace.get("session_id") if isinstance(namespace, dict) else None)
    return str(session) if session else None


def _user_of(doc: StoredDoc) -> str | None:
    namespace = doc.source.get("namespace")
    return str(namespace.get("user_id")) if isinstance(namespace, dict) and namespace.get("user_id") else None


class Forgetting:
    def __init__(
        self,
        forgetter: ForgettingStore,
        containers: Containers,
        memories: Memories,
        embeddings: Worker,
        *,
        memory_docs: MemoryDocStore,
        container_store: ContainerStore,
        enabled: bool,
    ) -> None:
        """``memory_docs``: what a cascade matches; ``container_store``: the containers a user's erasure visits."""
        #: Woken when a kept memory's text rolled back: it is embedded again.
        self.embeddings = embeddings
        self.forgetter = forgetter
        self.memory_docs = memory_docs
        self.container_store = container_store
        self.containers = containers
        self.memories = memories
        self.enabled = enabled

    async def _cascade(self, owner: Principal, container_id: str, working_ids: list[str]) -> Forgotten:
        forgotten = await self.forgetter.forget(owner, container_id, working_ids) if working_ids else Forgotten()
        if forgotten.long_term_kept:
            self.embeddings.wake()
        return forgotten

    async def _of_sessions(self, owner: Principal, container_id: str, session_ids: set[str]) -> Forgotten:
        """Forget every working memory of these sessions."""
        working = await self.memory_docs.docs(owner, container_id, WORKING)
        ids = [doc.id for doc in working if _session_of(doc) in session_ids]
        forgotten = await self._cascade(owner, container_id, ids)
        forgotten.sessions = sorted(session_ids)
        return forgotten

    async def delete(
        self, owner: Principal, container_id: str, raw_type: str, memory_id: str, report: bool = False
    ) -> DeletedMemory:
        """ml-commons' delete of one memory, then the cascade for a working memory or a session; ``report``:
        what it forgot comes with the answer."""
        memory_type = parse_memory_type(raw_type)
        cascade = self.enabled and memory_type in CASCADING
        try:
            written = await self.memories.delete(owner, container_id, raw_type, memory_id)
        except StatusNotFound:
            if cascade and (await self.containers.load(owner, container_id)).has(memory_type):
                await self._forget(owner, container_id, memory_type, memory_id)  # finish a cascade cut short
            raise
        forgotten = await self._forget(owner, container_id, memory_type, memory_id) if cascade else Forgotten()
        if memory_type == WORKING and memory_id not in forgotten.working:
            forgotten.working.append(memory_id)
        return DeletedMemory(written, forgotten if report else None)

    async def _forget(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> Forgotten:
        if memory_type == SESSIONS:
            return await self._of_sessions(owner, container_id, {memory_id})
        return await self._cascade(owner, container_id, [memory_id])

    async def delete_by_query(self, owner: Principal, container_id: str, request: DeleteByQueryInput) -> DeletedByQuery:
        """ml-commons' delete by query; on working memory or sessions, what it matches is forgotten."""
        memory_type = request.memory_type
        if not self.enabled or memory_type not in CASCADING:
            return await self.memories.delete_by_query(owner, container_id, request)
        container = await self.containers.load(owner, container_id)
        if not container.has(memory_type):
            raise InvalidArgument(f"Invalid memory type or memory type is disabled: {memory_type}")
        started = time.perf_counter()
        docs = await self.memory_docs.docs(owner, container_id, memory_type)
        matched, timed_out = await matching_ids(request.query, docs)
        if memory_type == WORKING:
            forgotten = await self._cascade(owner, container_id, matched)
            deleted = len(forgotten.working)
        else:
            await self._of_sessions(owner, container_id, set(matched))
            deleted = await self.memory_docs.delete_ids(owner, container_id, SESSIONS, matched)
        return DeletedByQuery(took(started), timed_out, len(matched), deleted)

    async def erase_user(self, organization_id: str, user_id: str) -> Forgotten:
        """In the organisation-wide key's containers: forget the user's working memories, delete the sessions
        left with none of anyone else's, and what is filed under ``namespace.user_id`` (the user's own
        containers are deleted whole elsewhere)."""
        owner, forgotten = Principal(organization_id, None), Forgotten()
        for container in await self.container_store.containers(owner):
            working = await self.memory_docs.docs(owner, container.id, WORKING)
            theirs = [doc for doc in working if _user_of(doc) == user_id]
            if theirs:
                forgotten.add(await self._cascade(owner, container.id, [doc.id for doc in theirs]))
            others = {_session_of(doc) for doc in working if _user_of(doc) != user_id}
            sessions = {_session_of(doc) for doc in theirs} - others
            for memory_type in (SESSIONS, LONG_TERM, HISTORY):
                docs = await self.memory_docs.docs(owner, container.id, memory_type)
                ids = [
                    doc.id for doc in docs if _user_of(doc) == user_id or memory_type == SESSIONS and doc.id in sessions
                ]
                if not ids:
                    continue
                await self.memory_docs.delete_ids(owner, container.id, memory_type, ids)
                target = {SESSIONS: forgotten.sessions, LONG_TERM: forgotten.long_term_deleted}.get(memory_type)
                (target if target is not None else forgotten.history_deleted).extend(ids)
        return forgotten
