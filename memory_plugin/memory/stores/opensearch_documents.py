"""The OpenSearch memory store's documents: a memory or message as this store indexes it, ml-commons'
fields plus our own ``memory_plugin`` object (owner, own id, exact times, exact ``additional_info``;
``opensearch_schema.py`` maps them), and back.

Apart from the store (``opensearch.py``) because they are pure: no client, no I/O, just what a
document looks like on each side of the wire, which the store, its outbox, its schema migration
and the search benchmark share.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.dates import isoformat, parse_instant
from memory_plugin.memory.models import Conversation, Interaction, merged
from memory_plugin.memory.stores.scoped_search import INTERNAL_FIELD

#: Largest UTF-8 size of one ``additional_info`` key + value that is indexed in the flat_object
#: (Lucene refuses terms over 32766 bytes; flat_object indexes ``key=value`` terms).
_FLAT_ENTRY_LIMIT = 8191

#: The exact (nanosecond) creation time: the sort key of every listing.
EXACT_CREATED = f"{INTERNAL_FIELD}.create_time"
#: The sort tie-breaker: a keyword copy of ``_id`` (sorting on ``_id`` needs field data).
OWN_ID = f"{INTERNAL_FIELD}.id"


def owner_fields(owner: Principal) -> dict[str, str]:
    return {"organization_id": owner.organization_id, "user": owner.user_id or ""}


def owner_filter(owner: Principal) -> list[dict[str, Any]]:
    return [{"term": {f"{INTERNAL_FIELD}.{name}": value}} for name, value in owner_fields(owner).items()]


def owned(source: Mapping[str, Any], owner: Principal) -> bool:
    internal = source.get(INTERNAL_FIELD) or {}
    return internal.get("organization_id") == owner.organization_id and internal.get("user") == (owner.user_id or "")


def _principal(source: Mapping[str, Any]) -> Principal:
    return principal_of(source[INTERNAL_FIELD])


def principal_of(fields: Mapping[str, Any]) -> Principal:
    """The inverse of ``owner_fields``."""
    return Principal(fields["organization_id"], fields.get("user") or None)


def _flat(value: Any) -> dict[str, str] | None:
    """The flat_object copy of ``additional_info``: only a map, only when every entry can be indexed."""
    if not isinstance(value, Mapping):
        return None
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            return None
        if len(key.encode()) + len(item.encode()) > _FLAT_ENTRY_LIMIT:
            return None
    return dict(value)


def _set_additional_info(source: dict[str, Any], value: Any) -> None:
    flat = _flat(value)
    if flat is None:
        source.pop("additional_info", None)
    else:
        source["additional_info"] = flat
    source[INTERNAL_FIELD]["additional_info_json"] = None if value is None else json.dumps(value)


def _additional_info(source: Mapping[str, Any]) -> Any:
    encoded = source[INTERNAL_FIELD].get("additional_info_json")
    return None if encoded is None else json.loads(encoded)


def set_time(source: dict[str, Any], name: str, value: str) -> None:
    """A time in ml-commons' field and, for exact ordering, in its nanosecond copy."""
    source[name] = value
    source[INTERNAL_FIELD][name] = value


def merge_into(source: dict[str, Any], changes: Mapping[str, Any]) -> bool:
    """Apply a partial update to ``source`` as OpenSearch would; False when nothing changes."""
    before = json.dumps(source, sort_keys=True)
    for name, value in changes.items():
        if name == "additional_info":
            _set_additional_info(source, merged(_additional_info(source), value))
        elif name == "updated_time":
            set_time(source, name, isoformat(value))
        else:
            source[name] = merged(source.get(name), value)
    return json.dumps(source, sort_keys=True) != before


def conversation_source(conversation: Conversation) -> dict[str, Any]:
    """ml-commons' meta document (``user`` only for a principal with one), plus ``memory_plugin``."""
    created, updated = isoformat(conversation.create_time), isoformat(conversation.updated_time)
    source: dict[str, Any] = {"create_time": created, "updated_time": updated}
    optional = {
        "name": conversation.name,
        "user": conversation.owner.user_id,
        "application_type": conversation.application_type,
    }
    source.update((name, value) for name, value in optional.items() if value is not None)
    source[INTERNAL_FIELD] = {
        **owner_fields(conversation.owner),
        "id": conversation.conversation_id,
        "create_time": created,
        "updated_time": updated,
    }
    _set_additional_info(source, conversation.additional_info)
    return source


def read_conversation(conversation_id: str, source: Mapping[str, Any], version: int = 1) -> Conversation:
    """``version`` is OpenSearch's ``_version``, less the writes made for message updates (``message_edits``)."""
    return Conversation(
        conversation_id=conversation_id,
        owner=_principal(source),
        name=source.get("name"),
        create_time=parse_instant(source["create_time"]),
        updated_time=parse_instant(source["updated_time"]),
        additional_info=_additional_info(source),
        application_type=source.get("application_type"),
        version=version - int(source[INTERNAL_FIELD].get("message_edits") or 0),
    )


def interaction_source(interaction: Interaction) -> dict[str, Any]:
    """ml-commons' message document, plus ``memory_plugin``."""
    created = isoformat(interaction.create_time)
    source: dict[str, Any] = {
        "memory_id": interaction.conversation_id,
        "create_time": created,
        "input": interaction.input,
        "prompt_template": interaction.prompt_template,
        "response": interaction.response,
        "origin": interaction.origin,
        "parent_message_id": interaction.parent_interaction_id,
        "trace_number": interaction.trace_number,
        INTERNAL_FIELD: {**owner_fields(interaction.owner), "id": interaction.interaction_id, "create_time": created},
    }
    _set_additional_info(source, interaction.additional_info)
    return source


def read_interaction(interaction_id: str, source: Mapping[str, Any], version: int = 1) -> Interaction:
    return Interaction(
        interaction_id=interaction_id,
        conversation_id=source["memory_id"],
        owner=_principal(source),
        create_time=parse_instant(source["create_time"]),
        input=source.get("input"),
        response=source.get("response"),
        prompt_template=source.get("prompt_template"),
        origin=source.get("origin"),
        additional_info=_additional_info(source),
        parent_interaction_id=source.get("parent_message_id"),
        trace_number=source.get("trace_number"),
        version=version,
    )
