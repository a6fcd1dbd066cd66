"""The one way every OpenSearch-backed store talks to a cluster.

Client construction, race-safe index creation, reads by id, checked bulk
requests, and deletion by query.  The region store (``stores/opensearch.py``),
the memory store (``memory/stores/opensearch.py``) and the agentic store
(``agentic/stores/opensearch.py``) all use it, so they share one retry policy
and one answer to the distribution's missing reindex module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConnectionError, ConnectionTimeout, NotFoundError, RequestError, TransportError

from memory_plugin.errors import ServiceError, Unavailable
from memory_plugin.settings import OpenSearchRegion

#: OpenSearch's default ``index.max_result_window``: the deepest ``from + size`` a search may ask for.
MAX_RESULT_WINDOW = 10000
#: Documents per bulk request.
BULK_DOCS = 1000


def unreachable(error: BaseException) -> ServiceError | None:
    """The typed error a cluster that did not answer means to a caller (a 503 to retry, not a 500 bug), or None."""
    if isinstance(error, ConnectionTimeout):
        return Unavailable(
            "the OpenSearch cluster did not answer in time; the request may or may not have taken effect"
        )
    if isinstance(error, ConnectionError):
        return Unavailable(
            "the connection to the OpenSearch cluster failed; the request may or may not have taken effect"
        )
    return None


def make_client(settings: OpenSearchRegion) -> AsyncOpenSearch:
    """A client for one cluster that never retries.

    Why no retries: a region that fails must fail fast, so that fan-out reports
    it in ``failed_regions`` within the search deadline instead of waiting out
    retries; and a write retried after a lost response could apply twice.  The
    caller (or its client) decides whether to try again, and sees a 503 meanwhile.
    """
    return AsyncOpenSearch(**client_options(settings))


def client_options(settings: OpenSearchRegion) -> dict[str, Any]:
    """What ``make_client`` passes to the client (the synchronous client takes the same)."""
    options: dict[str, Any] = {
        "hosts": list(settings.hosts),
        "verify_certs": settings.verify_certs,
        "timeout": settings.timeout,
        "max_retries": 0,
        "retry_on_timeout": False,
    }
    if settings.username is not None:
        options["http_auth"] = (settings.username, settings.password or "")
    if settings.ca_certs:
        options["ca_certs"] = settings.ca_certs
    if not settings.verify_certs:
        options["ssl_show_warn"] = False
    return options


async def create_index(client: AsyncOpenSearch, index: str, body: Mapping[str, Any]) -> bool:
    """Create ``index`` unless it exists; True if this call created it.

    Race-safe: two processes starting at once both see it missing, one
    creates it, and the other's ``resource_already_exists_exception`` is
    taken as success.  Either way it returns once the index's primary shards
    are active (``wait_for_primaries``): an index another process is still
    creating exists before it can be searched, and a search then fails with a
    503 (seen with several processes, where one created a container's index
    while another searched it, and the search's infer job ran its LLM call again).
    """
    created = False
    if not await client.indices.exists(index=index):
        try:
            await client.indices.create(index=index, body=dict(body))
            created = True
        except RequestError as error:
            if error.error != "resource_already_exists_exception":
                raise
    await wait_for_primaries(client, index)
    return created


#: How long ``wait_for_primaries`` waits at most: then the caller goes on, and a search may still meet a 503.
PRIMARIES_SECONDS = 30.0


async def wait_for_primaries(client: AsyncOpenSearch, index: str, seconds: float = PRIMARIES_SECONDS) -> None:
    """Until every primary shard of ``index`` is active (or ``seconds`` passed).

    Not ``wait_for_status=yellow``: OpenSearch reports a new index whose
    primaries are still initialising as yellow, not red (so that creating an
    index never turns a cluster red), and that wait answers at once while a
    search of the index still fails.  The index's own ``active_primary_shards``
    is what says it can be searched.
    """
    deadline = time.monotonic() + seconds
    pause = 0.01
    while True:
        health = await client.cluster.health(index=index, params={"level": "indices"})
        indices = health.get("indices") or {}
        if all(state["active_primary_shards"] >= state["number_of_shards"] for state in indices.values()):
            return  # every primary active (or no such index: nothing to wait for)
        if time.monotonic() >= deadline:
            return  # still starting: go on, as a caller without this wait would
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)


#: OpenSearch refuses a document ``_id`` longer than this many bytes.
MAX_ID_BYTES = 512


async def get_document(client: AsyncOpenSearch, index: str, doc_id: str) -> dict[str, Any] | None:
    """The document (with ``_seq_no`` and ``_primary_term``), real-time; None if it or its index is absent."""
    if not 0 < id_bytes(doc_id) <= MAX_ID_BYTES:
        return None  # no document has such an id (and a long one would not even fit in the request line)
    for pause in (*_SHARD_STARTING_PAUSES, None):
        try:
            document: dict[str, Any] = await client.get(index=index, id=doc_id)
        except NotFoundError:
            return None
        except TransportError as error:
            if pause is None or error.error != "no_shard_available_action_exception":
                raise
            await asyncio.sleep(pause)  # a shard still starting (an index just made): a read may wait
            continue
        return document if document.get("found") else None
    raise AssertionError("unreachable")


#: Pauses before reading again while a shard reports it is still starting, a few seconds in all: a GET
#: right after its index was created met ``CurrentState[RECOVERING]`` (make test, a loaded machine),
#: although the create had waited for the index to turn yellow.
_SHARD_STARTING_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


async def get_documents(
    client: AsyncOpenSearch, index: str, ids: Sequence[str], *, source: bool = True
) -> dict[str, dict[str, Any]]:
    """The documents found among ``ids`` (real-time, one request; without ``_source`` unless ``source``), by id."""
    wanted = list(dict.fromkeys(doc_id for doc_id in ids if 0 < id_bytes(doc_id) <= MAX_ID_BYTES))
    if not wanted:
        return {}
    params = None if source else {"_source": "false"}
    documents = (await client.mget(index=index, body={"ids": wanted}, params=params))["docs"]
    return {doc["_id"]: doc for doc in documents if doc.get("found")}


#: A write's ``_primary_term`` fits below this bit in :func:`write_place`.
_TERM_BITS = 20


def write_place(document: Mapping[str, Any]) -> int:
    """Where a document's last write sits in its shard's history (``_seq_no`` and ``_primary_term``) as one
    number: it moves with every write, and :func:`seq_no_and_term` gives both back for a conditional write."""
    return int(document["_seq_no"]) * (1 << _TERM_BITS) + int(document["_primary_term"])


def seq_no_and_term(place: int) -> tuple[int, int]:
    return divmod(place, 1 << _TERM_BITS)


def id_bytes(doc_id: str) -> int:
    """A document id's length as OpenSearch counts it (UTF-8 bytes)."""
    return len(doc_id.encode("utf-8", "surrogatepass"))


async def bulk(client: AsyncOpenSearch, actions: Sequence[Mapping[str, Any]], *, refresh: bool) -> None:
    """One bulk request; raises on the first failed item (a delete of a missing document is no failure)."""
    response = await client.bulk(body=list(actions), refresh="true" if refresh else "false")
    if not response.get("errors"):
        return
    for item in response["items"]:
        operation, result = next(iter(item.items()))
        if "error" in result and not (operation == "delete" and result.get("status") == 404):
            raise TransportError(result.get("status", 500), "bulk_failure", result["error"])


async def bulk_items(
    client: AsyncOpenSearch, actions: Sequence[Mapping[str, Any]], *, refresh: bool
) -> list[dict[str, Any]]:
    """One bulk request; each action's result (``status``, and ``error`` if it failed), in order."""
    response = await client.bulk(body=list(actions), refresh="true" if refresh else "false")
    return [next(iter(item.values())) for item in response["items"]]


def item_error(result: Mapping[str, Any]) -> TransportError | None:
    """A failed bulk item as the error a single request would have raised; None if it succeeded."""
    if "error" not in result:
        return None
    return TransportError(result.get("status", 500), "bulk_failure", result["error"])


#: Hits per page of ``scan``.
SCAN_PAGE = 5000


async def scan(
    client: AsyncOpenSearch, index: str, query: Mapping[str, Any], source: Sequence[str] | bool = False
) -> AsyncIterator[dict[str, Any]]:
    """Every hit of ``query`` (``_index``, ``_id`` and the ``source`` fields), in no particular order.

    A missing index yields nothing.  Most calls match a page or less (often nothing: a write's older
    generations), so one plain search answers them; only more than a page opens a scroll, cleared at the end.
    """
    body = {"query": dict(query), "_source": source if isinstance(source, bool) else list(source), "sort": ["_doc"]}
    lookup = {"index": index, "body": body, "size": SCAN_PAGE, "ignore_unavailable": True, "allow_no_indices": True}
    try:
        response = await client.search(**lookup, track_total_hits=True)
    except NotFoundError:
        return
    if len(response["hits"]["hits"]) >= response["hits"]["total"]["value"]:
        for hit in response["hits"]["hits"]:
            yield hit
        return
    try:
        response = await client.search(**lookup, scroll="1m")
    except NotFoundError:
        return
    scroll_id = response.get("_scroll_id")
    try:
        while response["hits"]["hits"]:
            for hit in response["hits"]["hits"]:
                yield hit
            response = await client.scroll(scroll_id=scroll_id, scroll="1m")
            scroll_id = response.get("_scroll_id", scroll_id)
    finally:
        if scroll_id:
            await client.clear_scroll(scroll_id=scroll_id, ignore=(404,))


async def delete_documents(client: AsyncOpenSearch, targets: Sequence[tuple[str, str]]) -> None:
    """Delete ``(index, id)`` pairs in bulk, refreshing with the last request so that reads see it."""
    for start in range(0, len(targets), BULK_DOCS):
        batch = targets[start : start + BULK_DOCS]
        actions = [{"delete": {"_index": index, "_id": doc_id}} for index, doc_id in batch]
        await bulk(client, actions, refresh=start + BULK_DOCS >= len(targets))


async def delete_by_query(
    client: AsyncOpenSearch, index: str, query: Mapping[str, Any], source: Sequence[str] | bool = False
) -> list[dict[str, Any]]:
    """Delete every document matching ``query``; return the hits deleted (with the ``source`` fields).

    The integ-test distribution has no reindex module, hence no
    ``_delete_by_query``: scroll the matching ids, then bulk-delete them.
    """
    hits = [hit async for hit in scan(client, index, query, source)]
    await delete_documents(client, [(hit["_index"], hit["_id"]) for hit in hits])
    return hits
