"""Memories and messages as ml-commons stores them: the ``_source`` a ``_search`` runs on.

Both memory stores build these documents (the OpenSearch store indexes them, the SQLite
store evaluates the query DSL over them), and the 2.12+ views render from the same parts.
"""

from __future__ import annotations

from typing import Any

from memory_plugin.dates import isoformat
from memory_plugin.memory.models import MESSAGE_TEXT_FIELDS, Conversation, Interaction


def additional_info_map(value: Any) -> dict[str, str] | None:
    """2.11 stored a string; 2.12+ shows a map, so a string is kept under its own key."""
    if value is None or isinstance(value, dict):
        return value
    return {"additional_info": value}


def texts(interaction: Interaction) -> dict[str, str | None]:
    return {name: getattr(interaction, name) for name in MESSAGE_TEXT_FIELDS}


def present(**fields: Any) -> dict[str, Any]:
    """The fields that have a value: ml-commons writes no null ones."""
    return {name: value for name, value in fields.items() if value is not None}


def memory_source(conversation: Conversation) -> dict[str, Any]:
    """A memory as ml-commons stores it: the ``_source`` of a ``_search`` hit."""
    return {
        "create_time": isoformat(conversation.create_time),
        "updated_time": isoformat(conversation.updated_time),
        **present(
            name=conversation.name,
            user=conversation.owner.user_id,
            application_type=conversation.application_type,
            additional_info=conversation.additional_info,
        ),
    }


def message_source(interaction: Interaction) -> dict[str, Any]:
    """A message as ml-commons stores it: parent and trace number always, the rest when given."""
    return {
        "memory_id": interaction.conversation_id,
        "create_time": isoformat(interaction.create_time),
        "parent_message_id": interaction.parent_interaction_id,
        "trace_number": interaction.trace_number,
        **present(**texts(interaction), additional_info=additional_info_map(interaction.additional_info)),
    }
