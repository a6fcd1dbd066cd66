"""Conversations and interactions as the services see them.

One stored form serves both API forms: 2.11 calls them conversations and
interactions, 2.12+ memories and messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from memory_plugin.auth import Principal

#: 2.11 sends ``additional_info`` as a string, 2.12+ as a string map.
AdditionalInfo = str | dict[str, str] | None

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Conversation:
    conversation_id: str
    owner: Principal
    name: str
    create_time: datetime
    updated_time: datetime
    additional_info: dict[str, str] | None = None


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


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list, and the offset of the next one when the page is full."""

    items: list[T] = field(default_factory=list)
    next_token: int | None = None
