"""The 2.12+ memory API in-process: memories and their messages (``plugin.memories``).

The same service and stored data as the 2.11 conversations of ``MemoryPlugin``, under the names
``/_plugins/_ml/memory`` uses; pages are checked as that API checks them (a search window).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_plugin.api.results import SearchHits
from memory_plugin.auth import Principal
from memory_plugin.dsl import MESSAGE_INDEX, META_INDEX
from memory_plugin.errors import InvalidArgument
from memory_plugin.memory.models import Conversation, Interaction, Page, Updated, java_blank
from memory_plugin.memory.requests_v212 import AT_LEAST_ONE
from memory_plugin.memory.service import DEFAULT_MAX_RESULTS, MemoryService, check_search_window


def _changes(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


class ConversationalMemory:
    """Memories (conversations) and messages, each call as ``principal``."""

    def __init__(self, service: MemoryService) -> None:
        self._service = service

    # -- memories -------------------------------------------------------------------------

    async def create_memory(
        self,
        principal: Principal,
        name: str | None = None,
        *,
        application_type: str | None = None,
        additional_info: Mapping[str, Any] | None = None,
    ) -> Conversation:
        return await self._service.create_conversation(principal, name, additional_info, application_type)

    async def get_memory(self, principal: Principal, memory_id: str) -> Conversation:
        return await self._service.get_conversation(principal, memory_id)

    async def list_memories(
        self, principal: Principal, next_token: int = 0, max_results: int = DEFAULT_MAX_RESULTS
    ) -> Page[Conversation]:
        """The principal's memories, most recently updated first."""
        check_search_window(next_token, max_results, "conversations", META_INDEX)
        return await self._service.list_conversations(principal, next_token, max_results, by="updated_time")

    async def update_memory(
        self,
        principal: Principal,
        memory_id: str,
        *,
        name: str | None = None,
        additional_info: Mapping[str, Any] | None = None,
    ) -> Updated[Conversation]:
        """``result`` is ``noop`` when nothing changed."""
        changes = _changes(name=name, additional_info=additional_info)
        return await self._service.update_conversation(principal, memory_id, changes)

    async def delete_memory(self, principal: Principal, memory_id: str) -> None:
        """Delete a memory and its messages."""
        await self._service.delete_conversation(principal, memory_id)

    async def search_memories(self, principal: Principal, query: Mapping[str, Any]) -> SearchHits:
        """A query DSL body (``{"query": {"match": {"name": "billing"}}}``) over the principal's memories."""
        return SearchHits.of(await self._service.search_conversations(principal, query))

    # -- messages -------------------------------------------------------------------------

    async def add_message(
        self,
        principal: Principal,
        memory_id: str,
        *,
        input: str | None = None,
        response: str | None = None,
        prompt_template: str | None = None,
        origin: str | None = None,
        additional_info: Mapping[str, str] | None = None,
        parent_message_id: str | None = None,
        trace_number: int | None = None,
    ) -> Interaction:
        """A message needs one non-blank text or some ``additional_info``; blank texts are kept as absent."""
        texts = {"input": input, "prompt_template": prompt_template, "response": response, "origin": origin}
        if all(java_blank(text) for text in texts.values()) and not additional_info:
            raise InvalidArgument(AT_LEAST_ONE)
        kept = {name: None if java_blank(text) else text for name, text in texts.items()}
        return await self._service.create_interaction(
            principal,
            memory_id,
            input=kept["input"],
            response=kept["response"],
            prompt_template=kept["prompt_template"],
            origin=kept["origin"],
            additional_info=dict(additional_info) if additional_info else None,
            parent_interaction_id=parent_message_id,
            trace_number=trace_number,
        )

    async def get_message(self, principal: Principal, message_id: str) -> Interaction:
        return await self._service.get_interaction(principal, message_id)

    async def list_messages(
        self, principal: Principal, memory_id: str, next_token: int = 0, max_results: int = DEFAULT_MAX_RESULTS
    ) -> Page[Interaction]:
        """A memory's messages, oldest first (as 2.12+ lists them)."""
        check_search_window(next_token, max_results, "interactions", MESSAGE_INDEX)
        return await self._service.list_interactions(principal, memory_id, next_token, max_results, False)

    async def update_message(
        self,
        principal: Principal,
        message_id: str,
        *,
        response: str | None = None,
        additional_info: Mapping[str, Any] | None = None,
    ) -> Updated[Interaction]:
        changes = _changes(response=response, additional_info=additional_info)
        return await self._service.update_interaction(principal, message_id, changes)

    async def list_traces(
        self, principal: Principal, message_id: str, next_token: int = 0, max_results: int = DEFAULT_MAX_RESULTS
    ) -> Page[Interaction]:
        """The messages whose ``parent_message_id`` is ``message_id``, by trace number."""
        check_search_window(next_token, max_results, "traces", MESSAGE_INDEX)
        return await self._service.list_traces(principal, message_id, next_token, max_results)

    async def search_messages(self, principal: Principal, memory_id: str, query: Mapping[str, Any]) -> SearchHits:
        """A query DSL body over one memory's messages."""
        return SearchHits.of(await self._service.search_interactions(principal, memory_id, query))
