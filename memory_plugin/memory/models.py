"""Conversations and interactions as the services see them.

One stored form serves both API forms: 2.11 calls them conversations and
interactions, 2.12+ memories and messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, Required, TypedDict, TypeVar

from memory_plugin.auth import Principal

#: 2.11 sends ``additional_info`` as a string, 2.12+ as a map (whose values ml-commons keeps as sent).
AdditionalInfo = str | dict[str, Any] | None

T = TypeVar("T")

#: An interaction's texts: 2.12+ leaves blank ones out.
MESSAGE_TEXT_FIELDS = ("input", "prompt_template", "response", "origin")


def java_blank(text: str | None) -> bool:
    """Java's ``s == null || s.trim().isEmpty()``: trim drops every character up to U+0020."""
    return text is None or not text.strip("".join(map(chr, range(0x21))))


@dataclass(frozen=True, slots=True)
class Conversation:
    conversation_id: str
    owner: Principal
    name: str | None
    create_time: datetime
    updated_time: datetime
    additional_info: dict[str, Any] | None = None
    application_type: str | None = None
    #: How many times the document was written, as OpenSearch's ``_version`` counts.
    version: int = 1


@dataclass(frozen=True, slots=True)
class Interaction:
    interaction_id: str
    conversation_id: str
    owner: Principal
    create_time: datetime
    input: str | None
    response: str | None
    prompt_template: str | None = None
    origin: str | None = None
    additional_info: AdditionalInfo = None
    parent_interaction_id: str | None = None
    trace_number: int | None = None
    version: int = 1


class InteractionFields(TypedDict, total=False):
    """What the caller says of a new interaction; its id, owner and time are the service's to give."""

    input: Required[str | None]
    response: Required[str | None]
    prompt_template: str | None
    origin: str | None
    additional_info: AdditionalInfo
    parent_interaction_id: str | None
    trace_number: int | None


Document = TypeVar("Document", Conversation, Interaction)


@dataclass(frozen=True, slots=True)
class Updated(Generic[Document]):
    """A document after an update, and whether anything changed (OpenSearch says ``noop`` when not)."""

    document: Document
    result: Literal["updated", "noop"]


def merged(current: Any, change: Any) -> Any:
    """An update's value applied as OpenSearch applies a partial document: maps merge key by key."""
    if isinstance(current, Mapping) and isinstance(change, Mapping):
        result = dict(current)
        for key, value in change.items():
            result[key] = merged(result.get(key), value)
        return result
    return change


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list, and the offset of the next one when the page is full."""

    items: list[T] = field(default_factory=list)
    next_token: int | None = None
