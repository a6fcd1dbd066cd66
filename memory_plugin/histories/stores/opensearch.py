"""The OpenSearch region store: one real cluster per region, one index per record_type.

Why it looks like this:

* **Indices.** ``{index_prefix}-{record_type}`` (lowercase; an unusual type
  name is hashed), one shard, no replicas, ``index.knn``.  Every index of a
  store carries the alias ``{index_prefix}.all`` so that deletes and
  cross-type cleanups reach exactly this store's indices (a ``prefix-*``
  pattern would also hit another store whose prefix extends ours).
* **Documents.** One per chunk, id ``{org}:{record_id}_chunk_{i}`` (the org
  keeps organisations apart), with the seed's top-level keyword/date fields,
  raw metadata under ``data.metadata.<k>``, and the derived filter fields
  described in :mod:`opensearch_filters` (``*_us``, ``meta_*``, ``fold``);
  :mod:`opensearch_documents` maps them and converts chunks to and from them.
* **Replacing a record** writes the new chunks first (deterministic ids, so a
  chunk is overwritten in place), tagged with a fresh ``generation``, then
  deletes the record's documents of any other generation (extra chunks, or
  chunks in another record_type's index).  OpenSearch has no multi-document
  transactions, so the guarantee is weaker than the SQLite store's: a crash
  between the two steps (or mid-bulk) never leaves a record with *no* chunks,
  but may leave new chunks beside stale old extras until the record is
  written again (ingestion is idempotent) or deleted.
* **Deletes** scroll the matching ids and bulk-delete them with a refresh
  (the test distribution has no reindex module, hence no ``_delete_by_query``);
  the distinct ``record_id``s seen give ``DeleteCounts.records`` exactly.
* **Scores.** Lucene's cosinesimil score is ``(1 + cos) / 2``; hits are
  converted back (``cos = 2 * score - 1``) before ``min_score`` applies, so
  scores compare with the SQLite store's.  ``k`` sent to Lucene is at least
  ``ef_search`` (it doubles as the candidate count), then cut to ``k``.
* **Failure.** The client never retries (``opensearch_client.make_client``): a
  dead cluster fails fast and the region shows in ``failed_regions``.  ``open()`` on an
  unreachable cluster logs and returns, so one dead region never stops the
  server; indices are then created on first write.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import ConnectionTimeout, NotFoundError

from memory_plugin.dates import to_micros
from memory_plugin.histories.stores.base import HistoryStore, unit_vector
from memory_plugin.histories.stores.claims import RecordClaims
from memory_plugin.histories.stores.filters import Filter
from memory_plugin.histories.stores.opensearch_claims import OpenSearchRecordClaims
from memory_plugin.histories.stores.opensearch_documents import SOURCE_EXCLUDES, document, index_mapping, read_record
from memory_plugin.histories.stores.opensearch_filters import compile_filter
from memory_plugin.histories.stores.opensearch_words import (
    WORDS_FIELDS,
    Lender,
    Place,
    lender_of,
    match_query,
    neighbour_search,
    words,
)
from memory_plugin.histories.stores.records import (
    RECORD_TYPES,
    SCORE_DECIMALS,
    Chunk,
    DeleteCounts,
    Hit,
    Record,
    shown_score,
)
from memory_plugin.opensearch_client import BULK_DOCS, bulk, create_index, delete_by_query, make_client, scan
from memory_plugin.settings import OpenSearchRegion

log = logging.getLogger(__name__)

#: Ids per ``terms`` query, well under ``index.max_terms_count`` (65536).
_TERMS_PER_QUERY = 10_000
_SAFE_TYPE = re.compile(r"[a-z0-9_][a-z0-9_-]{0,63}")


class OpenSearchHistoryStore(HistoryStore):
    """A region store on one OpenSearch cluster; see the module docstring for the design."""

    def __init__(
        self,
        settings: OpenSearchRegion,
        region: str,
        *,
        hnsw_m: int = 16,
        ef_construction: int = 128,
        ef_search: int = 128,
        create_indices: Sequence[str] = RECORD_TYPES,  # others appear on first write
    ) -> None:
        self.settings = settings
        self.region = region
        self.prefix = settings.index_prefix.lower()
        self.alias = f"{self.prefix}.all"
        self.hnsw_m, self.ef_construction, self.ef_search = hnsw_m, ef_construction, ef_search
        self._create = tuple(create_indices)
        self._dimension: int | None = None
        self._ready: set[str] = set()  # record types whose index is known to exist
        self.client = make_client(settings)

    # -- lifecycle ----------------------------------------------------------------

    def index_name(self, record_type: str) -> str:
        name = record_type.lower()
        if name != record_type or not _SAFE_TYPE.fullmatch(name):
            name = "x" + hashlib.sha1(record_type.encode()).hexdigest()[:16]
        return f"{self.prefix}-{name}"

    async def open(self, dimension: int) -> None:
        self._dimension = dimension
        try:
            for record_type in self._create:
                await self._ensure_index(record_type)
        except (OSConnectionError, ConnectionTimeout) as error:
            # One dead region must not stop the server: it fails per request instead.
            log.warning(
                "opensearch region %s unreachable at open (%r); indices come on first write", self.region, error
            )

    async def close(self) -> None:
        await self.client.close()

    def record_claims(self) -> RecordClaims:
        """Leases in this cluster, under this store's index prefix, through its client: every process in front
        of the cluster sees them."""
        return OpenSearchRecordClaims(self.client, self.prefix)

    async def health(self) -> dict[str, Any]:
        """Cluster status plus this store's counts (a record is its chunk 0: every record has one)."""
        health = await self.client.cluster.health()
        counts = {"index": self.alias, "ignore_unavailable": True, "allow_no_indices": True}
        try:
            chunks = (await self.client.count(**counts))["count"]
            records = (await self.client.count(body={"query": {"term": {"chunk_index": 0}}}, **counts))["count"]
        except NotFoundError:
            chunks = records = 0
        return {
            "status": health["status"],
            "cluster_name": health.get("cluster_name"),
            "records": records,
            "chunks": chunks,
        }

    async def _ensure_index(self, record_type: str) -> str:
        index = self.index_name(record_type)
        if record_type in self._ready:
            return index
        dimension = self._require_open()
        if await self.client.indices.exists(index=index):
            mapping = await self.client.indices.get_mapping(index=index)
            properties = mapping[index]["mappings"]["properties"]
            found = properties["vector"]["dimension"]
            if found != dimension:
                raise RuntimeError(f"index {index} has vectors of dimension {found}, the embedder {dimension}")
            if "words" not in properties:  # made before keyword search: its older chunks have no words
                await self.client.indices.put_mapping(index=index, body={"properties": WORDS_FIELDS})
        else:
            body = {
                "settings": {"index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 0}},
                "mappings": index_mapping(dimension, self.settings.knn_engine, self.hnsw_m, self.ef_construction),
                "aliases": {self.alias: {}},
            }
            await create_index(self.client, index, body)
        self._ready.add(record_type)
        return index

    def _require_open(self) -> int:
        if self._dimension is None:
            raise RuntimeError(f"opensearch store {self.region} is not open")
        return self._dimension

    # -- writes ---------------------------------------------------------------------

    async def write_records(self, items: Sequence[tuple[Record, Sequence[Chunk]]]) -> list[str]:
        """Index the new chunks, then delete each record's documents of older generations.

        Then the records that now follow a written one in their user's timeline borrow its words.
        """
        dimension = self._require_open()
        if not items:
            return []
        for record_type in {record.record_type for record, _ in items}:
            await self._ensure_index(record_type)
        lenders, borrowers = await self._timeline([(record, chunks[-1].text) for record, chunks in items])
        generation = uuid.uuid4().hex
        actions: list[dict[str, Any]] = []
        for record, chunks in items:  # validate everything before writing anything
            index = self.index_name(record.record_type)
            lender = lenders.get((record.organization_id, record.record_id))
            for chunk in chunks:
                doc = document(record, chunk, unit_vector(chunk.vector, dimension), generation, lender)
                actions.append({"index": {"_index": index, "_id": f"{record.organization_id}:{doc['chunk_id']}"}})
                actions.append(doc)
        for start in range(0, len(actions), 2 * BULK_DOCS):
            last = start + 2 * BULK_DOCS >= len(actions)
            await bulk(self.client, actions[start : start + 2 * BULK_DOCS], refresh=last)
        by_org: dict[str, list[str]] = defaultdict(list)
        for record, _ in items:
            by_org[record.organization_id].append(record.record_id)
        for organization_id, record_ids in by_org.items():
            for start in range(0, len(record_ids), _TERMS_PER_QUERY):
                query = {
                    "bool": {
                        "filter": [
                            {"term": {"organization_id": organization_id}},
                            {"terms": {"record_id": record_ids[start : start + _TERMS_PER_QUERY]}},
                        ],
                        "must_not": [{"term": {"generation": generation}}],
                    }
                }
                await self._delete_where(query)
        for (record_type, organization_id, record_id), lender in borrowers.items():
            await self._lend(record_type, organization_id, record_id, lender)
        return list(dict.fromkeys(record_id for _, _, record_id in borrowers))

    async def preceding_texts(self, records: Sequence[tuple[Record, str]]) -> dict[str, tuple[int, str]]:
        lenders, _ = await self._timeline(records, successors=False)  # an index not made yet answers no hit
        return {record_id: (lender.created_us, lender.text) for (_, record_id), lender in lenders.items()}

    async def following(self, organization_id: str, record_ids: Sequence[str]) -> list[str]:
        self._require_open()
        if not record_ids:
            return []
        query = _records_query(organization_id, record_ids, {"term": {"chunk_index": 0}})
        fields = ["record_id", "record_type", "user_id", "record_created_at_us"]
        # every generation a write in progress holds: each names the same place in the timeline
        places = [hit["_source"] async for hit in scan(self.client, self.alias, query, fields)]
        places = [source for source in places if "user_id" in source]
        if not places:
            return []
        searches: list[dict[str, Any]] = []
        for source in places:
            place = Place(organization_id, source["user_id"], int(source["record_created_at_us"]), source["record_id"])
            searches += [
                {"index": self.index_name(source["record_type"])},
                neighbour_search(place, before=False, excluding=list(record_ids)),
            ]
        responses = (await self.client.msearch(body=searches))["responses"]
        return list(dict.fromkeys(lender.record_id for response in responses if (lender := lender_of(response))))

    async def read_records(self, organization_id: str, record_ids: Sequence[str]) -> list[tuple[Record, list[Chunk]]]:
        self._require_open()
        if not record_ids:
            return []
        query = _records_query(organization_id, record_ids)
        documents: dict[str, list[dict[str, Any]]] = defaultdict(list)
        async for hit in scan(self.client, self.alias, query, True):
            documents[hit["_source"]["record_id"]].append(hit["_source"])
        found = []
        for docs in documents.values():
            # a write in progress holds two generations for a moment: the newer one is the record
            newest = max(docs, key=lambda doc: (doc["ingested_at_us"], doc["generation"]))["generation"]
            docs = sorted((doc for doc in docs if doc["generation"] == newest), key=lambda doc: doc["chunk_index"])
            chunks = [
                Chunk(doc["chunk_index"], doc["chunk_total"], doc["text"], np.asarray(doc["vector"], np.float32))
                for doc in docs
            ]
            found.append((read_record(docs[0]), chunks))
        return found

    async def _timeline(
        self, items: Sequence[tuple[Record, str]], *, successors: bool = True
    ) -> tuple[dict[tuple[str, str], Lender], dict[tuple[str, str, str], Lender]]:
        """Whom each record of ``items`` (with its last chunk's text) borrows its words from, and which stored
        records must borrow from one of them once written: ``((org, record_id) -> lender, (record_type, org,
        record_id) -> lender)``.

        One ``_msearch`` finds each record's stored neighbours (only the one before without ``successors``);
        the batch's own records count as well.
        """
        groups: dict[tuple[str, str, str], list[tuple[Place, Record, str]]] = defaultdict(list)
        for record, last_text in items:
            if record.user_id is not None:
                place = Place(
                    record.organization_id, record.user_id, to_micros(record.record_created_at), record.record_id
                )
                groups[(record.record_type, record.organization_id, record.user_id)].append((place, record, last_text))
        searches: list[dict[str, Any]] = []
        for (record_type, _, _), members in groups.items():
            members.sort(key=lambda member: member[0].key)
            excluding = [place.record_id for place, _, _ in members]
            for place, _, _ in members:
                for before in (True, False) if successors else (True,):
                    searches += [
                        {"index": self.index_name(record_type)},
                        neighbour_search(place, before=before, excluding=excluding),
                    ]
        lenders: dict[tuple[str, str], Lender] = {}
        borrowers: dict[tuple[str, str, str], Lender] = {}
        if not searches:
            return lenders, borrowers
        responses = iter((await self.client.msearch(body=searches))["responses"])
        for (record_type, organization_id, _), members in groups.items():
            for at, (place, record, last_text) in enumerate(members):
                stored_before = lender_of(next(responses))
                stored_after = lender_of(next(responses)) if successors else None
                if at > 0:
                    _, previous, previous_text = members[at - 1]
                    local = Lender(previous.record_id, members[at - 1][0].created_us, previous_text)
                    if stored_before is None or stored_before.key < local.key:
                        stored_before = local
                if stored_before is not None:
                    lenders[(organization_id, record.record_id)] = stored_before
                following = members[at + 1][0].key if at + 1 < len(members) else None
                if stored_after is not None and (following is None or stored_after.key < following):
                    borrowers[(record_type, organization_id, stored_after.record_id)] = Lender(
                        record.record_id, place.created_us, last_text
                    )
        return lenders, borrowers

    async def _lend(self, record_type: str, organization_id: str, record_id: str, lender: Lender | None) -> None:
        """Rewrite a stored record's words to borrow from ``lender`` (``None``: from nobody)."""
        query = {
            "bool": {"filter": [{"term": {"organization_id": organization_id}}, {"term": {"record_id": record_id}}]}
        }
        hits = [hit async for hit in scan(self.client, self.index_name(record_type), query, ["text"])]
        actions: list[dict[str, Any]] = []
        for hit in hits:
            change: dict[str, Any] = {
                "words": words(hit["_source"]["text"], lender),
                "context_record_id": None if lender is None else lender.record_id,
            }
            actions += [{"update": {"_index": hit["_index"], "_id": hit["_id"]}}, {"doc": change}]
        if actions:
            await bulk(self.client, actions, refresh=True)

    async def _relend(self, organization_id: str, deleted: set[str]) -> None:
        """After a delete: the records whose words borrowed from a deleted one borrow from their new predecessor."""
        query = {
            "bool": {
                "filter": [
                    {"term": {"organization_id": organization_id}},
                    {"terms": {"context_record_id": sorted(deleted)}},
                ]
            }
        }
        fields = ["record_id", "record_type", "user_id", "record_created_at_us"]
        borrowers = {
            hit["_source"]["record_id"]: hit["_source"] async for hit in scan(self.client, self.alias, query, fields)
        }
        for record_id, source in borrowers.items():
            place = Place(organization_id, source["user_id"], int(source["record_created_at_us"]), record_id)
            index = self.index_name(source["record_type"])
            try:
                response = await self.client.search(
                    index=index, body=neighbour_search(place, before=True, excluding=[])
                )
            except NotFoundError:
                continue
            await self._lend(source["record_type"], organization_id, record_id, lender_of(response))

    async def _delete_where(self, query: dict[str, Any], organization_id: str | None = None) -> tuple[int, int]:
        """Delete the documents matching ``query``; return ``(distinct records, chunks)``.

        With ``organization_id``, whole records went: the records that borrowed their words borrow anew.
        """
        hits = await delete_by_query(self.client, self.alias, query, ["record_id"])
        deleted = {hit["_source"]["record_id"] for hit in hits}
        if organization_id is not None and deleted:
            await self._relend(organization_id, deleted)
        return len(deleted), len(hits)

    async def record_owners(self, organization_id: str, record_ids: Sequence[str]) -> dict[str, str | None]:
        self._require_open()
        if not record_ids:
            return {}
        query = {
            "bool": {
                "filter": [
                    {"term": {"organization_id": organization_id}},
                    {"terms": {"record_id": list(record_ids)}},
                    {"term": {"chunk_index": 0}},
                ]
            }
        }
        try:
            response = await self.client.search(
                index=self.alias,
                body={"query": query, "_source": ["record_id", "user_id"]},
                size=len(record_ids),
                ignore_unavailable=True,
                allow_no_indices=True,
            )
        except NotFoundError:
            return {}
        return {hit["_source"]["record_id"]: hit["_source"].get("user_id") for hit in response["hits"]["hits"]}

    async def delete_record(self, organization_id: str, record_id: str) -> int:
        self._require_open()
        _, chunks = await self._delete_where(
            {"bool": {"filter": [{"term": {"organization_id": organization_id}}, {"term": {"record_id": record_id}}]}},
            organization_id,
        )
        return chunks

    async def delete_matching(self, organization_id: str, where: Filter) -> DeleteCounts:
        self._require_open()
        query = {"bool": {"filter": [{"term": {"organization_id": organization_id}}, *compile_filter(where)]}}
        records, chunks = await self._delete_where(query, organization_id)
        return DeleteCounts(records=records, chunks=chunks)

    # -- search -----------------------------------------------------------------------

    async def search(
        self,
        organization_id: str,
        record_type: str,
        vector: np.ndarray,
        where: Filter,
        k: int,
        min_score: float | None = None,
    ) -> list[Hit]:
        dimension = self._require_open()
        query = unit_vector(vector, dimension)
        if k <= 0:
            return []
        conditions = [{"term": {"organization_id": organization_id}}, *compile_filter(where)]
        body = {
            "size": k,
            "_source": {"excludes": SOURCE_EXCLUDES},
            "query": {
                "knn": {
                    "vector": {
                        "vector": query.tolist(),
                        "k": max(k, self.ef_search),
                        "filter": {"bool": {"filter": conditions}},
                    }
                }
            },
        }
        try:
            response = await self.client.search(index=self.index_name(record_type), body=body)
        except NotFoundError:
            return []
        hits = []
        for raw in response["hits"]["hits"]:
            source = raw["_source"]
            score = shown_score(2.0 * float(raw["_score"]) - 1.0)
            if min_score is not None and score < min_score:
                continue
            hits.append(
                Hit(
                    record=read_record(source),
                    chunk_index=int(source["chunk_index"]),
                    chunk_total=int(source["chunk_total"]),
                    text=source["text"],
                    score=score,
                )
            )
        hits.sort(key=lambda hit: (-hit.score, hit.record.record_id, hit.chunk_index))
        return hits[:k]

    async def keyword_search(
        self, organization_id: str, record_type: str, text: str, where: Filter, k: int
    ) -> list[Hit]:
        self._require_open()
        match = match_query(text)
        if match is None or k <= 0:
            return []
        conditions = [{"term": {"organization_id": organization_id}}, *compile_filter(where)]
        body = {
            "size": k,
            "_source": {"excludes": SOURCE_EXCLUDES},
            "query": {"bool": {"must": [match], "filter": conditions}},
            "sort": [{"_score": "desc"}, {"record_id": "asc"}, {"chunk_index": "asc"}],
            "track_scores": True,
        }
        try:
            response = await self.client.search(index=self.index_name(record_type), body=body)
        except NotFoundError:
            return []
        return [
            Hit(
                record=read_record(raw["_source"]),
                chunk_index=int(raw["_source"]["chunk_index"]),
                chunk_total=int(raw["_source"]["chunk_total"]),
                text=raw["_source"]["text"],
                score=round(float(raw["_score"]), SCORE_DECIMALS),
            )
            for raw in response["hits"]["hits"]
        ]

    async def neighbours(self, organization_id: str, found: Sequence[Hit]) -> dict[str, list[Hit]]:
        self._require_open()
        searches: list[dict[str, Any]] = []
        asked: list[str] = []
        for hit in found:
            record = hit.record
            for step, before in ((-1, True), (1, False)):
                if 0 <= hit.chunk_index + step < hit.chunk_total:
                    body: dict[str, Any] = {
                        "size": 1,
                        "query": {
                            "bool": {
                                "filter": [
                                    {"term": {"organization_id": organization_id}},
                                    {"term": {"record_id": record.record_id}},
                                    {"term": {"chunk_index": hit.chunk_index + step}},
                                ]
                            }
                        },
                    }
                elif record.user_id is not None:
                    place = Place(
                        organization_id, record.user_id, to_micros(record.record_created_at), record.record_id
                    )
                    body = neighbour_search(place, before=before, excluding=[])
                else:
                    continue
                body["_source"] = {"excludes": SOURCE_EXCLUDES}
                searches += [{"index": self.index_name(record.record_type)}, body]
                asked.append(hit.id)
        around: dict[str, list[Hit]] = {hit.id: [] for hit in found}
        if not searches:
            return around
        for key, response in zip(asked, (await self.client.msearch(body=searches))["responses"]):
            for raw in response.get("hits", {}).get("hits", []):
                source = raw["_source"]
                around[key].append(
                    Hit(
                        read_record(source), int(source["chunk_index"]), int(source["chunk_total"]), source["text"], 0.0
                    )
                )
        return around


def _records_query(organization_id: str, record_ids: Sequence[str], *more: dict[str, Any]) -> dict[str, Any]:
    """The chunks of the organisation's ``record_ids`` (a batch's: far below ``index.max_terms_count``)."""
    ids = {"terms": {"record_id": sorted(set(record_ids))}}
    return {"bool": {"filter": [{"term": {"organization_id": organization_id}}, ids, *more]}}
