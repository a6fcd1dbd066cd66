"""The documents of the OpenSearch region store: each record_type index's mapping, and a chunk to and from its
indexed form.

A chunk's document holds the seed's top-level keyword/date fields, raw metadata under ``data.metadata.<k>``,
and the derived filter fields that :mod:`opensearch_filters` queries (``*_us``, ``meta_*``, ``fold``) and the
words :mod:`opensearch_words` makes; searches leave those derived fields out of what they fetch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memory_plugin.dates import isoformat, parse_instant, to_micros
from memory_plugin.errors import InvalidArgument
from memory_plugin.histories.stores.filters import FIELD_NAME, fold
from memory_plugin.histories.stores.opensearch_filters import STRING_FIELDS
from memory_plugin.histories.stores.opensearch_words import WORDS_FIELDS, Lender, words
from memory_plugin.histories.stores.records import Chunk, Record

#: Keyword values longer than this are kept in _source but not indexed (Lucene's term limit is 32 KiB).
_IGNORE_ABOVE = 8191
#: The derived fields, which searches never fetch: a hit needs only the chunk and its record.
SOURCE_EXCLUDES = ["vector", "words", "fold", "meta_str", "meta_num", "meta_bool", "meta_fold", "*_us", "generation"]


def _keyword() -> dict[str, Any]:
    return {"type": "keyword", "ignore_above": _IGNORE_ABOVE}


def index_mapping(dimension: int, engine: str, m: int, ef_construction: int) -> dict[str, Any]:
    """The mapping of one record_type's index."""
    keywords = (
        "organization_id",
        "record_id",
        "record_type",
        "region",
        "user_id",
        "document_id",
        "retention",
        "chunk_id",
        "generation",
    )
    properties: dict[str, Any] = {name: _keyword() for name in keywords}
    date = {"type": "date", "format": "strict_date_optional_time||epoch_millis"}
    properties.update(
        record_created_at=date,
        ingested_at=date,
        record_created_at_us={"type": "long"},
        ingested_at_us={"type": "long"},
        chunk_index={"type": "integer"},
        chunk_total={"type": "integer"},
        text={"type": "text", "index": False},
        **WORDS_FIELDS,
        vector={
            "type": "knn_vector",
            "dimension": dimension,
            "method": {
                "name": "hnsw",
                "space_type": "cosinesimil",
                "engine": engine,
                "parameters": {"m": m, "ef_construction": ef_construction},
            },
        },
        fold={"properties": {name: _keyword() for name in STRING_FIELDS}},
        data={"properties": {"metadata": {"type": "object", "dynamic": True}}},
        meta_str={"type": "object", "dynamic": True},
        meta_num={"type": "object", "dynamic": True},
        meta_bool={"type": "object", "dynamic": True},
        meta_fold={"type": "object", "dynamic": True},
    )
    templates = [
        # Raw metadata as the seed names it (data.metadata.<k>): a keyword of any JSON scalar,
        # so mixed types never conflict.  Exact typed filtering uses the meta_* copies.
        {"data_metadata": {"path_match": "data.metadata.*", "mapping": _keyword()}},
        {"meta_str": {"path_match": "meta_str.*", "mapping": _keyword()}},
        {"meta_fold": {"path_match": "meta_fold.*", "mapping": _keyword()}},
        {"meta_num": {"path_match": "meta_num.*", "mapping": {"type": "double"}}},
        {"meta_bool": {"path_match": "meta_bool.*", "mapping": {"type": "boolean"}}},
    ]
    return {"dynamic": "strict", "dynamic_templates": templates, "properties": properties}


def document(
    record: Record, chunk: Chunk, vector: np.ndarray, generation: str, lender: Lender | None = None
) -> dict[str, Any]:
    """The indexed form of one chunk; its words borrow from ``lender`` (``opensearch_words``)."""
    doc: dict[str, Any] = {
        "organization_id": record.organization_id,
        "record_id": record.record_id,
        "record_type": record.record_type,
        "region": record.region,
        "chunk_id": f"{record.record_id}_chunk_{chunk.index}",
        "chunk_index": chunk.index,
        "chunk_total": chunk.total,
        "text": chunk.text,
        "words": words(chunk.text, lender),
        "record_created_at": isoformat(record.record_created_at),
        "ingested_at": isoformat(record.ingested_at),
        "record_created_at_us": to_micros(record.record_created_at),
        "ingested_at_us": to_micros(record.ingested_at),
        "generation": generation,
        "vector": vector.tolist(),
    }
    for name in ("user_id", "document_id", "retention"):
        value = getattr(record, name)
        if value is not None:
            doc[name] = value
    if lender is not None:
        doc["context_record_id"] = lender.record_id
    doc["fold"] = {name: fold(doc[name]) for name in STRING_FIELDS if name in doc}
    metadata = dict(record.metadata)
    doc["data"] = {"metadata": metadata}
    strings, numbers, booleans = {}, {}, {}
    for key, value in metadata.items():
        if not FIELD_NAME.fullmatch(key):
            raise InvalidArgument(f"metadata key {key!r} must match [A-Za-z0-9_-]{{1,64}}")
        if isinstance(value, bool):
            booleans[key] = value
        elif isinstance(value, (int, float)):
            numbers[key] = float(value)
        else:
            strings[key] = value
    doc.update(
        meta_str=strings,
        meta_fold={key: fold(value) for key, value in strings.items()},
        meta_num=numbers,
        meta_bool=booleans,
    )
    return doc


def read_record(source: dict[str, Any]) -> Record:
    """The record a chunk's document belongs to."""
    return Record(
        organization_id=source["organization_id"],
        record_id=source["record_id"],
        record_type=source["record_type"],
        region=source["region"],
        record_created_at=parse_instant(source["record_created_at"]),
        ingested_at=parse_instant(source["ingested_at"]),
        user_id=source.get("user_id"),
        document_id=source.get("document_id"),
        retention=source.get("retention"),
        metadata=source.get("data", {}).get("metadata", {}),
    )
