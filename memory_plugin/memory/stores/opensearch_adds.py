"""Adding messages to the OpenSearch memory store, in groups (``group_commit.py``).

Messages that arrive while a group is being written go together in the next, as one ``_mget`` of their
memories, one ``_bulk`` of the messages (and their outbox entries) and one ``_bulk`` of the
``updated_time`` bumps, each with one refresh.  A bump is a painless script keeping the maximum, with no
read and no version: writers of one memory, in any process, never conflict in a retry loop.
How an add and a ``delete_conversation`` race is told in ``opensearch.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import TransportError

from memory_plugin.dates import isoformat
from memory_plugin.memory.models import Interaction
from memory_plugin.memory.stores.opensearch_documents import interaction_source, owned
from memory_plugin.memory.stores.opensearch_outbox import OpenSearchOutbox
from memory_plugin.memory.stores.scoped_search import INTERNAL_FIELD
from memory_plugin.opensearch_client import bulk, bulk_items, get_documents, item_error

#: Optimistic-concurrency retries before giving up.
RETRIES = 50
#: An added message's bump: ``updated_time`` (ml-commons' and our exact copy) becomes the later of the two.
#: Same-format ISO strings order as the instants do (SQLite's max() on text).  The document is written even
#: when the time stays, as ml-commons' own update does (its ``_version`` counts it).
_BUMP = (
    f"def own = ctx._source['{INTERNAL_FIELD}'];"
    " if (own.updated_time.compareTo(params.time) < 0) { own.updated_time = params.time;"
    " ctx._source.updated_time = params.time; }"
)


async def add_messages(
    client: AsyncOpenSearch,
    meta_index: str,
    message_index: str,
    outbox: OpenSearchOutbox | None,
    interactions: Sequence[Interaction],
) -> list[bool | Exception]:
    """One group of added messages: one ``_mget``, one ``_bulk`` of the messages, one of the bumps.

    Each message is acknowledged only when its own items succeeded.  The messages (with their
    outbox entries) are written before ``updated_time`` moves, so that a delete racing with an
    add either collects the message or makes the bump miss (and the message is taken back), and
    so that the bump moves the memory's version only once its pages show the messages
    (``messages_version``).
    """
    outcomes: list[bool | Exception] = [False] * len(interactions)
    memories = await get_documents(client, meta_index, [i.conversation_id for i in interactions])
    alive = [
        n
        for n, interaction in enumerate(interactions)
        if interaction.conversation_id in memories
        and owned(memories[interaction.conversation_id]["_source"], interaction.owner)
    ]
    if not alive:
        return outcomes
    actions: list[dict[str, Any]] = []
    for n in alive:
        interaction = interactions[n]
        actions += [
            {"create": {"_index": message_index, "_id": interaction.interaction_id}},
            interaction_source(interaction),
        ]
        if outbox is not None:
            actions += outbox.entry_action(
                "index", interaction.owner, interaction.conversation_id, interaction.interaction_id
            )
    per_message = 2 if outbox is not None else 1
    try:
        items = await bulk_items(client, actions, refresh=True)
    except Exception as error:
        if outbox is not None:  # a message without its entry would never be indexed: take them back
            await _take_back(client, message_index, [interactions[n].interaction_id for n in alive])
        for n in alive:
            outcomes[n] = error
        return outcomes
    written, take_back = [], []
    for k, n in enumerate(alive):
        failures = [item_error(item) for item in items[k * per_message : (k + 1) * per_message]]
        failure = next((error for error in failures if error is not None), None)
        if failure is None:
            written.append(n)
            continue
        outcomes[n] = failure
        if failures[0] is None:  # the message is in, its entry is not
            take_back.append(interactions[n].interaction_id)
    if take_back:  # before the bumps: a page read at the bumped version must not show it
        await _take_back(client, message_index, take_back)
        take_back = []
    # ``updated_time`` only moves forward: one scripted update per memory keeps the maximum, without
    # a read or a version, so writers of one memory (in any process) never conflict in a retry loop.
    latest: dict[str, str] = {}
    for n in written:
        interaction = interactions[n]
        created = isoformat(interaction.create_time)
        latest[interaction.conversation_id] = max(latest.get(interaction.conversation_id, created), created)
    bumps: list[dict[str, Any]] = []
    for conversation_id, created in latest.items():
        bumps += [
            {"update": {"_index": meta_index, "_id": conversation_id, "retry_on_conflict": RETRIES}},
            {"script": {"lang": "painless", "source": _BUMP, "params": {"time": created}}},
        ]
    try:
        bumped = dict(zip(latest, await bulk_items(client, bumps, refresh=True))) if bumps else {}
    except Exception as error:
        for n in written:
            outcomes[n] = error
        bumped = {}
    for n in written if bumped else []:
        item = bumped[interactions[n].conversation_id]
        if item.get("status") == 404:  # the memory was deleted while we wrote: take the message back
            take_back.append(interactions[n].interaction_id)
            outcomes[n] = False
        else:
            outcomes[n] = item_error(item) or True
    if take_back:
        await _take_back(client, message_index, take_back)
    return outcomes


async def _take_back(client: AsyncOpenSearch, index: str, doc_ids: Sequence[str]) -> None:
    try:
        await bulk(client, [{"delete": {"_index": index, "_id": doc_id}} for doc_id in doc_ids], refresh=True)
    except TransportError:
        pass  # as a crash would: the message stays, never listed (its memory is gone) or never acknowledged
