"""The public, in-process API: every feature of the server, without a second server or HTTP.

Agentic memory, mem0-style: the LLM the settings name (``[agentic.llm] url``, any OpenAI-compatible
chat completions endpoint) infers facts from what is added, and search finds them by meaning::

    async with MemoryPlugin.open(load_settings()) as mp:
        me = Principal("acme", "support-bot")
        box = await mp.agentic.create_container(
            me, "support", llm_id="default", strategies=[MemoryStrategy()], **mp.agentic.built_in_embedding()
        )
        await mp.agentic.add(me, box, "I moved to Lisbon last month", user_id="alice", infer=True)
        await mp.agentic.settled()
        for found in await mp.agentic.search(me, box, "where does she live", user_id="alice"):
            print(found.score, found.memory)

The other features, each on the same services the HTTP server runs:

* ``mp.create_conversation``, ``add_interaction``, … : the 2.11 conversational memory;
* ``mp.memories``: the 2.12+ memories and messages (``ConversationalMemory``);
* ``mp.agentic``: containers, memories, sessions, semantic and hybrid search, forgetting (``AgenticMemory``);
* ``mp.models``: connectors, models and predict (``Models``);
* ``mp.ingest``, ``mp.search``, ``mp.erase_user``: conversation-history records and their semantic search.

Every method takes the principal it acts as (organisation, user, backend roles) explicitly and runs
the same services, with the same validation and the same typed errors, as the HTTP server.
``examples/asyncio_memory.py`` runs through them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Unpack

from embedder import Embedder
from memory_plugin.api.agentic import AgenticMemory
from memory_plugin.api.memories import ConversationalMemory
from memory_plugin.api.models import Models
from memory_plugin.auth import Principal
from memory_plugin.dates import isoformat
from memory_plugin.erasure.service import Erasure
from memory_plugin.errors import InvalidArgument
from memory_plugin.histories.service import IngestedRecord, SearchQuery, SearchResult
from memory_plugin.histories.stores.filters import Condition, Filter, parse_filters
from memory_plugin.memory.models import Conversation, Interaction, InteractionFields, Page
from memory_plugin.memory.service import DEFAULT_MAX_RESULTS
from memory_plugin.services import Services, open_services
from memory_plugin.settings import Settings

#: A filter value: one value for ``eq``, or ``{"op": value}``; ``in`` takes a list.
FilterSpec = Mapping[str, Any]


def _filter_text(value: Any) -> str:
    if isinstance(value, datetime):
        return isoformat(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def filters_from_python(filters: FilterSpec | None) -> Filter:
    """``{"language": "en", "region": {"in": ["USA", "DEU"]}}`` → the same tree as the query string gives."""
    pairs: list[tuple[str, str]] = []
    for field, spec in (filters or {}).items():
        operations = spec if isinstance(spec, Mapping) else {"eq": spec}
        for op, value in operations.items():
            if op == "in":
                values = [value] if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) else value
                texts = [_filter_text(v) for v in values]
                if any("," in text for text in texts):
                    raise InvalidArgument(
                        f"filter[{field}][in] values may not contain commas", parameter=f"filter[{field}][in]"
                    )
                pairs.append((f"filter[{field}][in]", ",".join(texts)))
            else:
                pairs.append((f"filter[{field}][{op}]", _filter_text(value)))
    return parse_filters(pairs)


class MemoryPlugin:
    """Every API of the server in-process: 2.11 conversations and history search here, the rest under
    ``memories``, ``agentic`` and ``models``."""

    def __init__(self, services: Services) -> None:
        self._services = services
        #: The 2.12+ memory API: memories and messages.
        self.memories = ConversationalMemory(services.memory)
        #: Agentic memory: containers, memories, sessions, search and forgetting.
        self.agentic = AgenticMemory(services.agentic)
        #: Connectors, models and predict.
        self.models = Models(services.ml)

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: Settings, *, embedder: Embedder | None = None) -> AsyncIterator[MemoryPlugin]:
        """Open the stores and the embedder; close them all on exit."""
        async with open_services(settings, embedder=embedder) as services:
            yield cls(services)

    # -- conversations ----------------------------------------------------------------

    async def create_conversation(
        self, principal: Principal, name: str = "", additional_info: Mapping[str, str] | None = None
    ) -> Conversation:
        return await self._services.memory.create_conversation(principal, name, additional_info)

    async def add_interaction(
        self, principal: Principal, conversation_id: str, **fields: Unpack[InteractionFields]
    ) -> Interaction:
        """The fields of ``InteractionFields`` as keywords: ``input`` and ``response`` always (either may be None)."""
        return await self._services.memory.create_interaction(principal, conversation_id, **fields)

    async def indexed(self, timeout: float = 60.0) -> None:
        """Wait until every interaction written so far is searchable (the bridge indexes in the background)."""
        if self._services.bridge is not None:
            await self._services.bridge.settled(timeout)

    async def list_conversations(
        self, principal: Principal, next_token: int = 0, max_results: int = DEFAULT_MAX_RESULTS
    ) -> Page[Conversation]:
        return await self._services.memory.list_conversations(principal, next_token, max_results)

    async def get_conversation(self, principal: Principal, conversation_id: str) -> Conversation:
        return await self._services.memory.get_conversation(principal, conversation_id)

    async def list_interactions(
        self,
        principal: Principal,
        conversation_id: str,
        next_token: int = 0,
        max_results: int = DEFAULT_MAX_RESULTS,
        newest_first: bool = True,
    ) -> Page[Interaction]:
        return await self._services.memory.list_interactions(
            principal, conversation_id, next_token, max_results, newest_first
        )

    async def update_conversation(
        self,
        principal: Principal,
        conversation_id: str,
        *,
        name: str | None = None,
        additional_info: Mapping[str, str] | None = None,
    ) -> Conversation:
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = name
        if additional_info is not None:
            changes["additional_info"] = additional_info
        return (await self._services.memory.update_conversation(principal, conversation_id, changes)).document

    async def delete_conversation(self, principal: Principal, conversation_id: str) -> None:
        await self._services.memory.delete_conversation(principal, conversation_id)

    # -- records ----------------------------------------------------------------------

    async def ingest(self, principal: Principal, records: Sequence[Mapping[str, Any]]) -> list[IngestedRecord]:
        """Records as in ``POST /v2/ai/conversation_histories``; all are checked before any is written."""
        return await self._services.histories.ingest(principal, records)

    async def delete_record(self, principal: Principal, record_id: str) -> int:
        """Delete one record; the number of chunks deleted."""
        return await self._services.histories.delete_record(principal, record_id)

    async def erase_user(self, principal: Principal, user_id: str) -> Erasure:
        """Delete every record of one user of the principal's organisation, and that user's memory and containers."""
        where = Filter((Condition("user_id", "eq", (user_id,)),))
        return await self._services.erasure.delete_matching(principal, where)

    async def search(
        self,
        principal: Principal,
        q: str,
        record_type: str,
        *,
        region: str | None = None,
        top_k: int = 20,
        min_score: float | None = None,
        filters: FilterSpec | None = None,
        page_number: int = 1,
        page_size: int = 20,
    ) -> SearchResult:
        query = SearchQuery(
            q=q,
            record_type=record_type,
            region=region,
            top_k=top_k,
            min_score=min_score,
            where=filters_from_python(filters),
            page_number=page_number,
            page_size=page_size,
        )
        return await self._services.histories.search(principal, query)
