"""How conversations and interactions look in each API form."""

from __future__ import annotations

import json
from typing import Any

from memory_plugin.dates import isoformat
from memory_plugin.memory.models import Conversation, Interaction, Page


def _additional_info_string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _additional_info_map(value: Any) -> dict[str, str] | None:
    """2.11 stored a string; 2.12+ shows a map, so a string is kept under its own key."""
    if value is None or isinstance(value, dict):
        return value
    return {"additional_info": value}


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
        "input": interaction.input,
        "prompt_template": interaction.prompt_template,
        "response": interaction.response,
        "origin": interaction.origin,
        "additional_info": _additional_info_string(interaction.additional_info),
    }


def page_v211(key: str, page: Page[Any], render: Any) -> dict[str, Any]:
    body: dict[str, Any] = {key: [render(item) for item in page.items]}
    if page.next_token is not None:
        body["next_token"] = page.next_token
    return body


# -- 2.12+: memories and messages --------------------------------------------------


def memory_v212(conversation: Conversation) -> dict[str, Any]:
    """ml-commons' ``ConversationMeta.toXContent``: ``name`` always (null when unnamed)."""
    body: dict[str, Any] = {
        "memory_id": conversation.conversation_id,
        "create_time": isoformat(conversation.create_time),
        "updated_time": isoformat(conversation.updated_time),
        "name": conversation.name,
    }
    if conversation.owner.user_id is not None:
        body["user"] = conversation.owner.user_id
    if conversation.additional_info is not None:
        body["additional_info"] = conversation.additional_info
    return body


def message_v212(interaction: Interaction) -> dict[str, Any]:
    """ml-commons' ``Interaction.toXContent``: blank texts and absent fields are left out."""
    body: dict[str, Any] = {
        "memory_id": interaction.conversation_id,
        "message_id": interaction.interaction_id,
        "create_time": isoformat(interaction.create_time),
    }
    for name in ("input", "prompt_template", "response", "origin"):
        value = getattr(interaction, name)
        if not _java_blank(value):
            body[name] = value
    if interaction.additional_info is not None:
        body["additional_info"] = _additional_info_map(interaction.additional_info)
    if interaction.parent_interaction_id is not None:
        body["parent_message_id"] = interaction.parent_interaction_id
    if interaction.trace_number is not None:
        body["trace_number"] = interaction.trace_number
    return body


def memory_source(conversation: Conversation) -> dict[str, Any]:
    """A memory as ml-commons stores it: the ``_source`` of a ``_search`` hit."""
    source: dict[str, Any] = {
        "create_time": isoformat(conversation.create_time),
        "updated_time": isoformat(conversation.updated_time),
    }
    optional = {
        "name": conversation.name,
        "user": conversation.owner.user_id,
        "application_type": conversation.application_type,
        "additional_info": conversation.additional_info,
    }
    source.update((name, value) for name, value in optional.items() if value is not None)
    return source


def message_source(interaction: Interaction) -> dict[str, Any]:
    """A message as ml-commons stores it: parent and trace number always, the rest when given."""
    source: dict[str, Any] = {
        "memory_id": interaction.conversation_id,
        "create_time": isoformat(interaction.create_time),
        "parent_message_id": interaction.parent_interaction_id,
        "trace_number": interaction.trace_number,
    }
    optional = {
        "input": interaction.input,
        "prompt_template": interaction.prompt_template,
        "response": interaction.response,
        "origin": interaction.origin,
        "additional_info": _additional_info_map(interaction.additional_info),
    }
    source.update((name, value) for name, value in optional.items() if value is not None)
    return source


def _java_blank(text: str | None) -> bool:
    """Java's ``s == null || s.trim().isEmpty()``: trim drops every character up to U+0020."""
    return text is None or not text.strip("".join(map(chr, range(0x21))))
