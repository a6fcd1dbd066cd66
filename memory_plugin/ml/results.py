"""What the ML services answer, typed, one result per endpoint; ``views`` renders each as ml-commons' JSON.

The documents' fields are in ml-commons' ``toXContent`` order: the views write them in that order and leave
out the ones without a value, as the real node does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Self

from memory_plugin.dsl import DocumentResults


class _Document:
    """A stored document as its get shows it, read from the stored source (other keys are bookkeeping)."""

    __slots__ = ()

    @classmethod
    def of(cls, source: Mapping[str, Any]) -> Self:
        return cls(**{f.name: source.get(f.name) for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ConnectorDoc(_Document):
    """``Connector.toXContent``: never the credential."""

    name: str | None = None
    version: str | None = None
    description: str | None = None
    protocol: str | None = None
    parameters: dict[str, str] | None = None
    actions: list[dict[str, Any]] | None = None
    created_time: int | None = None
    last_updated_time: int | None = None
    client_config: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ModelDoc(_Document):
    """``MLModel.toXContent``; ``connector`` is a remote model's own connector."""

    name: str | None = None
    model_group_id: str | None = None
    algorithm: str | None = None
    model_version: str | None = None
    model_format: str | None = None
    description: str | None = None
    model_state: str | None = None
    model_config: dict[str, Any] | None = None
    rate_limiter: dict[str, str] | None = None
    created_time: int | None = None
    last_updated_time: int | None = None
    last_deployed_time: int | None = None
    last_undeployed_time: int | None = None
    model_id: str | None = None
    auto_redeploy_retry_times: int | None = None
    planning_worker_node_count: int | None = None
    current_worker_node_count: int | None = None
    planning_worker_nodes: list[str] | None = None
    deploy_to_all_nodes: bool | None = None
    is_hidden: bool | None = None
    connector_id: str | None = None
    connector: ConnectorDoc | None = None
    guardrails: dict[str, Any] | None = None

    @classmethod
    def of(cls, source: Mapping[str, Any]) -> Self:
        inline = source.get("connector")
        values = {f.name: source.get(f.name) for f in fields(cls)}
        values["connector"] = ConnectorDoc.of(inline) if isinstance(inline, Mapping) else None
        return cls(**values)


@dataclass(frozen=True, slots=True)
class TaskDoc(_Document):
    """``MLTask.toXContent``."""

    model_id: str | None = None
    task_type: str | None = None
    function_name: str | None = None
    state: str | None = None
    worker_node: list[str] | None = None
    create_time: int | None = None
    last_update_time: int | None = None
    is_async: bool | None = None


@dataclass(frozen=True, slots=True)
class GroupDoc(_Document):
    """``MLModelGroup.toXContent``; ``owner`` is ml-commons' ``User`` (None for the organisation's key)."""

    name: str | None = None
    latest_version: int | None = None
    description: str | None = None
    backend_roles: list[str] | None = None
    owner: dict[str, Any] | None = None
    access: str | None = None
    created_time: int | None = None
    last_updated_time: int | None = None


@dataclass(frozen=True, slots=True)
class Found:
    """A ``_search``'s hits over one kind of document, and how long it took (ms)."""

    index: str
    results: DocumentResults
    took: int


@dataclass(frozen=True, slots=True)
class WriteResult:
    """A write as OpenSearch reports it; ``version`` is the document's before the write."""

    index: str
    doc_id: str
    version: int
    result: str
    refresh: bool


@dataclass(frozen=True, slots=True)
class ConnectorCreated:
    connector_id: str


@dataclass(frozen=True, slots=True)
class ModelRegistered:
    """A model registered, and its register task (already completed)."""

    task_id: str
    model_id: str


@dataclass(frozen=True, slots=True)
class ModelDeployed:
    """A deploy's task (already completed: a remote model has nothing to load)."""

    task_id: str


@dataclass(frozen=True, slots=True)
class Undeployed:
    """What an undeploy did to each model it named on this node (``undeployed`` or ``not_found``)."""

    node_id: str
    stats: dict[str, str]


@dataclass(frozen=True, slots=True)
class GroupCreated:
    model_group_id: str


@dataclass(frozen=True, slots=True)
class GroupUpdated:
    """A model group update; ml-commons answers the same whether it changed anything."""

    changed: bool


@dataclass(frozen=True, slots=True)
class Tensor:
    """``ModelTensor``: an embedding (``data``, with its type and shape) or a remote answer (``data_as_map``)."""

    name: str
    data_type: str | None = None
    shape: tuple[int, ...] | None = None
    data: Sequence[float] | None = None
    data_as_map: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Inference:
    """One ``inference_results`` entry: a remote call's tensors and status code, or one text's embedding."""

    output: tuple[Tensor, ...]
    status_code: int | None = None


@dataclass(frozen=True, slots=True)
class Predictions:
    results: tuple[Inference, ...]
