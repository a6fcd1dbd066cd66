"""The conversational memory, whichever API form asks and whichever store holds it.

Both HTTP forms (2.11 conversations, 2.12+ memories) and the public Python
API call this class.  It owns the rules: paging bounds, what may be
updated, ownership, and what the history bridge hears.  It knows no HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol, Unpack

from memory_plugin.auth import Principal
from memory_plugin.clock import new_id, now
from memory_plugin.errors import InvalidArgument, MapperParsingError, NotFound, ResultWindowTooLarge, ValidationFailed
from memory_plugin.memory.models import Conversation, Interaction, InteractionFields, Page, Updated
from memory_plugin.memory.stores.base import MemoryStore
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

#: OpenSearch's ``index.max_result_window``: the furthest any page may reach.
#: ml-commons caps ``max_results`` at the index's result window.
MAX_RESULTS_LIMIT = MAX_RESULT_WINDOW
DEFAULT_MAX_RESULTS = 10

CONVERSATION_UPDATABLE = ("name", "additional_info")
INTERACTION_UPDATABLE = ("response", "additional_info")


class InteractionBridge(Protocol):
    """Makes interactions searchable history records, from the outbox entries the store writes with them."""

    def check(self, interaction: Interaction, field: str) -> None:
        """Raise ``InvalidArgument`` naming ``field`` if no record could hold the interaction."""

    def notify(self) -> None:
        """New outbox entries are committed."""


#: ml-commons' own validation messages, by what is being listed.
_NOT_POSITIVE = {
    "conversations": "Can't list 0 or negative conversations",
    "interactions": "The number of interactions to retrieve must be positive",
    "traces": "The number of traces to retrieve must be positive",
}


def _validation(message: str, parameter: str) -> ValidationFailed:
    return ValidationFailed(f"Validation Failed: 1: {message};", parameter=parameter)


def check_page(next_token: int, max_results: int, noun: str) -> None:
    if max_results <= 0:
        raise _validation(_NOT_POSITIVE[noun], "max_results")
    if max_results > MAX_RESULTS_LIMIT:
        raise _validation(f"max_results must be at most {MAX_RESULTS_LIMIT}", "max_results")
    if next_token < 0:
        raise _validation("The starting position must be nonnegative (next_token)", "next_token")


def check_search_window(next_token: int, max_results: int, noun: str, index: str) -> None:
    """2.12+ pages are searches: ml-commons' own check, then OpenSearch's on ``from`` and ``size``."""
    if max_results <= 0:
        raise _validation(_NOT_POSITIVE[noun], "max_results")
    if next_token < 0 and noun != "conversations":
        raise _validation("The starting position must be nonnegative", "next_token")
    if next_token < 0:
        raise InvalidArgument(f"[from] parameter cannot be negative, found [{next_token}]", parameter="next_token")
    if next_token + max_results > MAX_RESULTS_LIMIT:
        raise ResultWindowTooLarge(next_token + max_results, index)


def _page(items: list[Any], next_token: int, max_results: int) -> Page[Any]:
    full = len(items) == max_results
    return Page(items=items, next_token=next_token + max_results if full else None)


def conversation_not_found(conversation_id: str) -> NotFound:
    return NotFound("conversation", conversation_id)


def interaction_not_found(interaction_id: str) -> NotFound:
    return NotFound("interaction", interaction_id)


def check_additional_info_map(value: Any, parameter: str = "additional_info") -> dict[str, Any] | None:
    """A map (ml-commons keeps its values as sent), or None."""
    if value is None:
        return None
    # the keys' types in one C pass: a Python loop over 400k keys held the event loop for 0.1 s
    if not isinstance(value, Mapping) or not set(map(type, value)) <= {str}:
        raise InvalidArgument(f"[{parameter}] must be an object", parameter=parameter)
    return dict(value)


def refuse_nulls(changes: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for name in allowed:
        if name in changes and changes[name] is None:
            raise InvalidArgument(f"[{name}] must not be null", parameter=name)


def checked_updates(changes: Mapping[str, Any], allowed: tuple[str, ...], document_id: str) -> dict[str, Any]:
    """The fields an update may change, as ml-commons filters them; the rest is ignored.

    What the index mapping refuses is refused as OpenSearch words it.  ml-commons also
    stores values that then fail its own reads (a number or a list as a name, a null it
    turns into a NullPointerException): those are refused here instead.
    """
    values = {name: value for name, value in changes.items() if name in allowed}
    for name, value in values.items():
        if value is None:
            raise InvalidArgument(f"[{name}] must not be null", parameter=name)
        if name == "additional_info":
            if not isinstance(value, Mapping):
                raise MapperParsingError(name, "flat_object", document_id, value)
        elif isinstance(value, Mapping):
            raise MapperParsingError(name, "text", document_id, value)
        elif not isinstance(value, str):
            raise InvalidArgument(f"[{name}] must be a string", parameter=name)
    return values


class MemoryService:
    def __init__(self, store: MemoryStore, bridge: InteractionBridge | None = None) -> None:
        self.store = store
        self.bridge = bridge

    # -- conversations ----------------------------------------------------------

    async def create_conversation(
        self,
        owner: Principal,
        name: str | None = "",
        additional_info: Mapping[str, Any] | None = None,
        application_type: str | None = None,
    ) -> Conversation:
        created = now()
        conversation = Conversation(
            conversation_id=new_id(),
            owner=owner,
            name=name,
            create_time=created,
            updated_time=created,
            additional_info=check_additional_info_map(additional_info),
            application_type=application_type,
        )
        await self.store.add_conversation(conversation)
        return conversation

    async def get_conversation(self, owner: Principal, conversation_id: str) -> Conversation:
        conversation = await self.store.get_conversation(owner, conversation_id)
        if conversation is None:
            raise conversation_not_found(conversation_id)
        return conversation

    async def list_conversations(
        self,
        owner: Principal,
        next_token: int = 0,
        max_results: int = DEFAULT_MAX_RESULTS,
        by: str = "create_time",
    ) -> Page[Conversation]:
        check_page(next_token, max_results, "conversations")
        items = await self.store.list_conversations(owner, next_token, max_results, by)
        return _page(items, next_token, max_results)

    async def update_conversation(
        self, owner: Principal, conversation_id: str, changes: Mapping[str, Any]
    ) -> Updated[Conversation]:
        """Merge the updatable fields in; ``updated_time`` moves on every update, as in ml-commons."""
        # ml-commons fails on nulls (a NullPointerException) first, then reads the document, then the index
        # checks the values.
        refuse_nulls(changes, CONVERSATION_UPDATABLE)
        if not await self.store.get_conversation(owner, conversation_id):
            raise conversation_not_found(conversation_id)
        values = checked_updates(changes, CONVERSATION_UPDATABLE, conversation_id)
        values["updated_time"] = now()
        updated = await self.store.update_conversation(owner, conversation_id, values)
        if updated is None:
            raise conversation_not_found(conversation_id)
        return updated

    async def delete_conversation(self, owner: Principal, conversation_id: str) -> None:
        deleted = await self.store.delete_conversation(owner, conversation_id)
        if deleted is None:
            raise conversation_not_found(conversation_id)
        if self.bridge is not None:
            self.bridge.notify()

    async def erase_user(self, organization_id: str, user_id: str) -> tuple[int, int]:
        """Erase a user's whole conversational memory in one organisation: ``(memories, messages)`` removed.

        No bridge call: the caller (the history service's erasure) removes the user's records itself.
        """
        return await self.store.erase_user(Principal(organization_id, user_id))

    # -- interactions -------------------------------------------------------------

    async def create_interaction(
        self, owner: Principal, conversation_id: str, **fields: Unpack[InteractionFields]
    ) -> Interaction:
        # ml-commons checks neither the parent nor the trace number; listing traces is scoped to the owner.
        interaction = Interaction(
            interaction_id=new_id(), conversation_id=conversation_id, owner=owner, create_time=now(), **fields
        )
        if self.bridge is not None:
            larger = "input" if len(interaction.input or "") > len(interaction.response or "") else "response"
            self.bridge.check(interaction, larger)
        if not await self.store.add_interaction(interaction):
            raise conversation_not_found(conversation_id)
        if self.bridge is not None:
            self.bridge.notify()
        return interaction

    # -- search ---------------------------------------------------------------------

    async def search_conversations(self, owner: Principal, body: Mapping[str, Any] | None) -> dict[str, Any]:
        """An OpenSearch query over the owner's memories; no body can reach past the owner."""
        return await self.store.search_conversations(owner, body)

    async def search_interactions(
        self, owner: Principal, conversation_id: str, body: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """An OpenSearch query over one memory's messages: a bad body is a 400 before an unknown memory's 404."""
        result = await self.store.search_interactions(owner, conversation_id, body)
        await self.get_conversation(owner, conversation_id)
        return result

    async def get_interaction(self, owner: Principal, interaction_id: str) -> Interaction:
        interaction = await self.store.get_interaction(owner, interaction_id)
        if interaction is None:
            raise interaction_not_found(interaction_id)
        return interaction

    async def list_interactions(
        self,
        owner: Principal,
        conversation_id: str,
        next_token: int = 0,
        max_results: int = DEFAULT_MAX_RESULTS,
        newest_first: bool = True,
    ) -> Page[Interaction]:
        check_page(next_token, max_results, "interactions")
        items = await self.store.list_interactions(owner, conversation_id, next_token, max_results, newest_first)
        if items is None:
            raise conversation_not_found(conversation_id)
        return _page(items, next_token, max_results)

    async def messages_version(self, conversation_id: str) -> int | None:
        """Changes whenever :meth:`list_interactions` of this conversation could answer differently
        (None: unknown, so never cache): a page rendered at one version may be served again at it."""
        return await self.store.messages_version(conversation_id)

    async def list_traces(
        self, owner: Principal, interaction_id: str, next_token: int = 0, max_results: int = DEFAULT_MAX_RESULTS
    ) -> Page[Interaction]:
        check_page(next_token, max_results, "traces")
        items = await self.store.list_traces(owner, interaction_id, next_token, max_results)
        if items is None:
            raise interaction_not_found(interaction_id)
        return _page(items, next_token, max_results)

    async def update_interaction(
        self, owner: Principal, interaction_id: str, changes: Mapping[str, Any]
    ) -> Updated[Interaction]:
        refuse_nulls(changes, INTERACTION_UPDATABLE)  # in ml-commons' order, as update_conversation
        current = await self.store.get_interaction(owner, interaction_id)
        if current is None:
            raise interaction_not_found(interaction_id)
        values = checked_updates(changes, INTERACTION_UPDATABLE, interaction_id)
        if self.bridge is not None and "response" in values:
            self.bridge.check(replace(current, response=values["response"]), "response")
        updated = await self.store.update_interaction(owner, interaction_id, values)
        if updated is None:
            raise interaction_not_found(interaction_id)
        if self.bridge is not None and updated.result == "updated" and "response" in values:
            self.bridge.notify()
        return updated
