"""The records the region stores keep, and what a search returns.

These types sit at the bottom of the floor plan: stores, services and routes
all speak them, and they import nothing of the project.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

#: The record types of seed 003; the OpenSearch store creates their indices up front.
RECORD_TYPES = ("voice", "message", "ai_pipeline_storage", "knowledge_base")

MetadataValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class Record:
    """A record's own fields, shared by all of its chunks."""

    organization_id: str
    record_id: str
    record_type: str
    region: str
    record_created_at: datetime
    ingested_at: datetime
    user_id: str | None = None
    document_id: str | None = None
    retention: str | None = None
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One embedded span of a record's text."""

    index: int
    total: int
    text: str
    #: float32, L2-normalised, of the embedder's dimension.
    vector: np.ndarray


#: Decimal places of a search score.  A score is rounded once, where a store makes it, so that
#: ``min_score``, the merge across regions and the response all see the very number the caller
#: is shown: "min_score = the last score I saw" keeps that hit (issue 22).
SCORE_DECIMALS = 6


def shown_score(cosine: float) -> float:
    """A cosine as the API shows and compares it: within [-1, 1], to ``SCORE_DECIMALS`` places."""
    return round(min(1.0, max(-1.0, float(cosine))), SCORE_DECIMALS)


def chunk_id(record_id: str, index: int) -> str:
    return f"{record_id}_chunk_{index}"


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk found by a search, with its cosine similarity to the query."""

    record: Record
    chunk_index: int
    chunk_total: int
    text: str
    score: float

    @property
    def id(self) -> str:
        return chunk_id(self.record.record_id, self.chunk_index)


@dataclass(frozen=True, slots=True)
class DeleteCounts:
    records: int
    chunks: int
