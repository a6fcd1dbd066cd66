"""How conversations and interactions look in each API form."""

from __future__ import annotations

import json
from typing import Any

from memory_plugin.dates import isoformat
from memory_plugin.memory.models import MESSAGE_TEXT_FIELDS, Conversation, Interaction, Page, java_blank


def _additional_info_string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _additional_info_map(value: Any) -> dict[str, str] | None:
    """2.11 stored a string; 2.12+ shows a map, so a string is kept under its own key."""
    if value is None or isinstance(value, dict):
        return value
    return {"additional_info": value}


def _texts(interaction: Interaction) -> dict[str, str | None]:
    return {name: getattr(interaction, name) for name in MESSAGE_TEXT_FIELDS}


# -- 2.11: conversations and interactions ----------------------------------------


def conversation_v211(conversation: Conversation) -> dict[str, Any]:
    return {
        "conversation_id": conversation.conversation_id,
        "create_time": isoformat(conversation.create_time),
        "name": conversation.name,
    }


def interaction_v211(interaction: Interaction) -> dict[str, Any]:
    return {
        "conversation_id": interaction.conversation_id,
        "interaction_id": interaction.interaction_id,
        "create_time": isoformat(interaction.create_time),
        **_texts(interaction),
        "additional_info": _additional_info_string(interaction.additional_info),
    }


def page_v211(key: str, page: Page[Any], render: Any) -> dict[str, Any]:
    body: dict[str, Any] = {key: [render(item) for item in page.items]}
    if page.next_token is not None:
        body["next_token"] = page.next_token
    return body


# -- 2.12+: memories and messages --------------------------------------------------


def _present(**fields: Any) -> dict[str, Any]:
    """The fields that have a value: ml-commons writes no null ones."""
    return {name: value for name, value in fields.items() if value is not None}


def memory_v212(conversation: Conversation) -> dict[str, Any]:
    """ml-commons' ``ConversationMeta.toXContent``: ``name`` always (null when unnamed)."""
    return {
        "memory_id": conversation.conversation_id,
        "create_time": isoformat(conversation.create_time),
        "updated_time": isoformat(conversation.updated_time),
        "name": conversation.name,
        **_present(user=conversation.owner.user_id, additional_info=conversation.additional_info),
    }


def message_v212(interaction: Interaction) -> dict[str, Any]:
    """ml-commons' ``Interaction.toXContent``: blank texts and absent fields are left out."""
    return {
        "memory_id": interaction.conversation_id,
        "message_id": interaction.interaction_id,
        "create_time": isoformat(interaction.create_time),
        **{name: text for name, text in _texts(interaction).items() if not java_blank(text)},
        **_present(
            additional_info=_additional_info_map(interaction.additional_info),
            parent_message_id=interaction.parent_interaction_id,
            trace_number=interaction.trace_number,
        ),
    }


def memory_source(conversation: Conversation) -> dict[str, Any]:
    """A memory as ml-commons stores it: the ``_source`` of a ``_search`` hit."""
    return {
        "create_time": isoformat(conversation.create_time),
        "updated_time": isoformat(conversation.updated_time),
        **_present(
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
        **_present(**_texts(interaction), additional_info=_additional_info_map(interaction.additional_info)),
    }
