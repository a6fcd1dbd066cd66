"""``/v2/ai/conversation_histories``: ingest, search, delete (seed 003, CONTRACT 4-5)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory_plugin.dates import isoformat
from memory_plugin.errors import InvalidArgument
from memory_plugin.histories.service import HistoryService, SearchQuery
from memory_plugin.histories.stores.filters import Filter, parse_filters
from memory_plugin.histories.stores.records import Hit
from memory_plugin.http.body import check_fields, read_json_object
from memory_plugin.http.json import json_response
from memory_plugin.http.middleware import principal_of
from memory_plugin.http.params import check_params, float_param, int_param

BASE = "/v2/ai/conversation_histories"
SEARCH_PARAMS = ("q", "record_type", "region", "top_k", "min_score", "mode", "page[number]", "page[size]")

HISTORIES = web.AppKey("history_service", HistoryService)
routes = web.RouteTableDef()


def hit_view(hit: Hit) -> dict[str, Any]:
    """A search result; ``retention`` is filter-only and never shown."""
    record = hit.record
    item: dict[str, Any] = {
        "id": hit.id,
        "record_id": record.record_id,
        "chunk_index": hit.chunk_index,
        "chunk_total": hit.chunk_total,
        "text": hit.text,
        "score": hit.score,
        "record_type": record.record_type,
        "region": record.region,
        "user_id": record.user_id,
        "organization_id": record.organization_id,
        "record_created_at": isoformat(record.record_created_at),
        "ingested_at": isoformat(record.ingested_at),
        "metadata": dict(record.metadata),
    }
    if record.document_id is not None:
        item["document_id"] = record.document_id
    return item


def filters_of(request: web.Request) -> Filter:
    """The request's ``filter[...]`` parameters."""
    return parse_filters((name, value) for name, value in request.query.items() if name.startswith("filter["))


@routes.get(BASE)
async def search(request: web.Request) -> web.Response:
    check_params(request, SEARCH_PARAMS, prefixes=("filter[",))
    for name in ("q", "record_type"):
        if name not in request.query:
            raise InvalidArgument(f"{name} is required", parameter=name)
    query = SearchQuery(
        q=request.query["q"],
        record_type=request.query["record_type"],
        region=request.query.get("region"),
        top_k=int_param(request, "top_k", 20),
        min_score=float_param(request, "min_score"),
        where=filters_of(request),
        page_number=int_param(request, "page[number]", 1),
        page_size=int_param(request, "page[size]", 20),
        mode=request.query.get("mode", "semantic"),
    )
    result = await request.config_dict[HISTORIES].search(principal_of(request), query)
    meta: dict[str, Any] = {
        "total_pages": result.total_pages,
        "total_results": result.total_results,
        "page_number": result.page_number,
        "page_size": result.page_size,
    }
    if result.failed_regions:
        meta["failed_regions"] = result.failed_regions
    return json_response({"data": [hit_view(hit) for hit in result.hits], "meta": meta})


@routes.post(BASE)
async def ingest(request: web.Request) -> web.Response:
    check_params(request)
    body = await read_json_object(request, required=True) or {}
    check_fields(body, ("records",))
    if "records" not in body:
        raise InvalidArgument("records is required", parameter="records")
    ingested = await request.config_dict[HISTORIES].ingest(principal_of(request), body["records"])
    data = [
        {
            "record_id": item.record_id,
            "region": item.region,
            "record_type": item.record_type,
            "chunk_total": item.chunk_total,
            "ingested_at": isoformat(item.ingested_at),
        }
        for item in ingested
    ]
    return json_response({"data": data}, status=201)


@routes.delete(BASE + "/{record_id}")
async def delete_record(request: web.Request) -> web.Response:
    check_params(request)
    record_id = request.match_info["record_id"]
    deleted = await request.config_dict[HISTORIES].delete_record(principal_of(request), record_id)
    return json_response({"data": {"record_id": record_id, "deleted_chunks": deleted}})
