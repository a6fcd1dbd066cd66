"""How conversations and interactions look in each API form."""

from __future__ import annotations

import json
from typing import Any

from memory_plugin.dates import isoformat
from memory_plugin.memory.documents import additional_info_map, present, texts
from memory_plugin.memory.models import Conversation, Interaction, Page, java_blank


def _additional_info_string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


# -- 2.11: conversations and interactions ----------------------------------------


def conversation_v211(conversation: Conversation) -> dict[str, Any]:
    return {
        "conversation_id": conversation.conversation_id,
        "create_time": isoformat(conversation.create_time),
        "name": conversation.name,
    }


def interaction_v211(interaction: Interaction) -> dict[str, Any]:
    """Every field, null or not."""
    return {
        "conversation_id": interaction.conversation_id,
        "interaction_id": interaction.interaction_id,
        "create_time": isoformat(interaction.create_time),
        **texts(interaction),
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
    return {
        "memory_id": conversation.conversation_id,
        "create_time": isoformat(conversation.create_time),
        "updated_time": isoformat(conversation.updated_time),
        "name": conversation.name,
        **present(user=conversation.owner.user_id, additional_info=conversation.additional_info),
    }


def message_v212(interaction: Interaction) -> dict[str, Any]:
    """ml-commons' ``Interaction.toXContent``: blank texts and absent fields are left out."""
    return {
        "memory_id": interaction.conversation_id,
        "message_id": interaction.interaction_id,
        "create_time": isoformat(interaction.create_time),
        **{name: text for name, text in texts(interaction).items() if not java_blank(text)},
        **present(
            additional_info=additional_info_map(interaction.additional_info),
            parent_message_id=interaction.parent_interaction_id,
            trace_number=interaction.trace_number,
        ),
    }
