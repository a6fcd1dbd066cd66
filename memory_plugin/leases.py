"""Leases on OpenSearch queue documents: which server process works an entry, and for how long.

Any number of server processes, on one host or many, drain the same queues in
OpenSearch (the history bridge's outbox, agentic infer jobs and pending
embeddings).  A process takes a document by writing ``lease_holder`` (its own
random token) and ``lease_until`` with ``if_seq_no``/``if_primary_term`` of the
version it read: of two processes taking the same version one wins, the other
gets a 409 and passes it by.  Queries for work skip documents with a live
lease; a lease that ran out (its holder died or stalled) is anyone's.
Finishing an entry (delete, retry, renew) is conditional on the version the
holder's last write left, so a holder whose lease was taken over cannot finish
the entry a second time: its write gets a 409 and changes nothing.

``lease_until`` is the claimer's wall clock, compared with the reader's: the
hosts' clocks must agree to well within a lease (NTP keeps them within
milliseconds; leases are a minute or more).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError, TransportError

from memory_plugin.clock import new_id

#: This process's token: a lease names the process that holds it (for operators reading the index).
HOLDER = new_id()


def _new_holder() -> None:
    """A forked worker is a process of its own, with a token of its own."""
    global HOLDER
    HOLDER = new_id()


os.register_at_fork(after_in_child=_new_holder)

#: The lease fields, as mapped in every queue index.
LEASE_MAPPINGS: dict[str, Any] = {"lease_holder": {"type": "keyword"}, "lease_until": {"type": "double"}}

#: How long the history bridge holds the outbox entries of one batch.  Safe because the bridge gives a batch
#: up after half of it (``HistoryBridge.batch_seconds``): a live holder never outlasts its lease, and
#: one that dies mid-batch delays its entries by two minutes at most.  (Its records are ingested under
#: ids of their interactions, so a batch redone by another process writes the same records again.)
OUTBOX_LEASE_SECONDS = 120.0

#: A finished or released entry: claimable by anyone at once.
RELEASED: dict[str, Any] = {"lease_until": 0.0}


class LeaseLost(Exception):
    """Another process took over this entry (our lease ran out): stop working on it, it is theirs now."""


@dataclass
class Lease:
    """The version of a document our last write left: the condition of our next write to it."""

    seq_no: int
    primary_term: int

    def condition(self) -> dict[str, int]:
        return {"if_seq_no": self.seq_no, "if_primary_term": self.primary_term}


def leased(now: float, seconds: float) -> dict[str, Any]:
    """The fields that give this process the entry for ``seconds`` from ``now``."""
    return {"lease_holder": HOLDER, "lease_until": now + seconds}


def unleased(now: float, field: str = "lease_until") -> dict[str, Any]:
    """A query clause: entries nobody holds at ``now`` (never taken, released, or their lease ran out)."""
    return {
        "bool": {
            "should": [{"bool": {"must_not": {"exists": {"field": field}}}}, {"range": {field: {"lte": now}}}],
            "minimum_should_match": 1,
        }
    }


async def claim(
    client: AsyncOpenSearch, hits: Sequence[Mapping[str, Any]], fields: Mapping[str, Any]
) -> list[tuple[Mapping[str, Any], Lease]]:
    """Write ``fields`` into each hit (searched with ``seq_no_primary_term``) unless it changed since it was
    read; the hits won, with their leases.  Refreshed, so that other processes' searches pass them by."""
    actions: list[dict[str, Any]] = []
    for hit in hits:
        condition = Lease(hit["_seq_no"], hit["_primary_term"]).condition()
        actions += [{"update": {"_index": hit["_index"], "_id": hit["_id"], **condition}}, {"doc": dict(fields)}]
    results = await conditional_bulk(client, actions, refresh=True)
    return [(hit, lease) for hit, lease in zip(hits, results) if lease is not None]


async def conditional_bulk(
    client: AsyncOpenSearch, actions: Sequence[Mapping[str, Any]], *, refresh: bool
) -> list[Lease | None]:
    """One bulk request whose items may lose a race: per action, the version it wrote, or None when it
    found the document changed (409), absent (404) or already created (a create's 409).  Other failures raise."""
    if not actions:
        return []
    response = await client.bulk(body=list(actions), refresh="true" if refresh else "false")
    results: list[Lease | None] = []
    for item in response["items"]:
        operation, result = next(iter(item.items()))
        if "error" not in result:
            results.append(Lease(result["_seq_no"], result["_primary_term"]))
        elif result.get("status") in (404, 409):
            results.append(None)
        else:
            raise TransportError(result.get("status", 500), f"bulk_{operation}_failure", result["error"])
    return results


async def renew(
    client: AsyncOpenSearch, index: str, doc_id: str, lease: Lease, fields: Mapping[str, Any], refresh: bool = False
) -> bool:
    """Write ``fields`` (a longer lease, or a release) if we still hold the entry; False, and nothing written,
    when we do not.  Not refreshed by default: the version check is real-time, only searches would lag."""
    try:
        result = await client.update(
            index=index,
            id=doc_id,
            body={"doc": dict(fields)},
            refresh="true" if refresh else "false",
            **lease.condition(),
        )
    except (ConflictError, NotFoundError):
        return False
    lease.seq_no, lease.primary_term = result["_seq_no"], result["_primary_term"]
    return True


async def ensure_lease_fields(client: AsyncOpenSearch, index: str, fields: Mapping[str, Any] = LEASE_MAPPINGS) -> None:
    """Map the lease fields in an index created before leases existed (adding fields to a mapping is allowed)."""
    await client.indices.put_mapping(
        index=index, body={"properties": dict(fields)}, ignore_unavailable=True, allow_no_indices=True
    )
