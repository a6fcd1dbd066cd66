"""The wire shapes of ml-commons' documents: what get and ``_search`` show, in ml-commons' key order,
the index names and mappings its searches see, and the answers of its writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from memory_plugin.dsl import search_response
from memory_plugin.dsl.mapping import DATE, FLAT_OBJECT, KEYWORD, LONG, TEXT, Fields
from memory_plugin.ml.results import (
    ConnectorCreated,
    ConnectorDoc,
    Found,
    GroupCreated,
    GroupDoc,
    GroupUpdated,
    Inference,
    ModelDeployed,
    ModelDoc,
    ModelRegistered,
    Predictions,
    TaskDoc,
    Tensor,
    Undeployed,
    WriteResult,
)
from memory_plugin.ml.stores.base import Stored

CONNECTOR_INDEX = ".plugins-ml-connector"
MODEL_INDEX = ".plugins-ml-model"
MODEL_GROUP_INDEX = ".plugins-ml-model-group"
TASK_INDEX = ".plugins-ml-task"
#: Writes a document has had since its create, kept in it: what its ``_version`` counts.
WRITES = "_writes"
CONNECTOR_ORDER = tuple(f.name for f in fields(ConnectorDoc))
MODEL_ORDER = tuple(f.name for f in fields(ModelDoc))
TASK_ORDER = tuple(f.name for f in fields(TaskDoc))


#: ml-commons' index mappings (``index-mappings/ml_connector.json``, ``ml_model.json``), as far as our documents
#: hold the fields; a field they leave out is mapped dynamically on the real node (text with a keyword).
CONNECTOR_FIELDS: Fields = {
    "name": TEXT,
    "name.keyword": KEYWORD,
    "version": KEYWORD,
    "description": TEXT,
    "protocol": KEYWORD,
    "parameters": FLAT_OBJECT,
    "actions": FLAT_OBJECT,
    "client_config": FLAT_OBJECT,
    "created_time": DATE,
    "last_updated_time": DATE,
}
MODEL_FIELDS: Fields = {
    "algorithm": KEYWORD,
    "name": TEXT,
    "name.keyword": KEYWORD,
    "model_version": KEYWORD,
    "model_group_id": KEYWORD,
    "model_id": KEYWORD,
    "description": TEXT,
    "model_format": KEYWORD,
    "model_state": KEYWORD,
    "planning_worker_node_count": LONG,
    "current_worker_node_count": LONG,
    "planning_worker_nodes": KEYWORD,
    "auto_redeploy_retry_times": LONG,
    "created_time": DATE,
    "last_updated_time": DATE,
    "last_deployed_time": DATE,
    "last_undeployed_time": DATE,
    "connector_id": TEXT,
    "connector_id.keyword": KEYWORD,
    "connector": FLAT_OBJECT,
    "model_config": FLAT_OBJECT,
}


TASK_FIELDS: Fields = {
    "model_id": KEYWORD,
    "task_type": KEYWORD,
    "function_name": KEYWORD,
    "state": KEYWORD,
    "worker_node": KEYWORD,
    "create_time": DATE,
    "last_update_time": DATE,
}


def _ordered(source: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """``order``'s fields that have a value: ml-commons' ``toXContent`` writes no null (nor do documents
    stored with one before that was kept to here)."""
    return {key: source[key] for key in order if source.get(key) is not None}


def task_view(source: Mapping[str, Any]) -> dict[str, Any]:
    return _ordered(source, TASK_ORDER)


def connector_view(source: Mapping[str, Any]) -> dict[str, Any]:
    return _ordered(source, CONNECTOR_ORDER)


def model_search_view(source: Mapping[str, Any]) -> dict[str, Any]:
    """A model as ``_search`` shows it: its stored fields, the inline connector without its credential."""
    view = _ordered(source, MODEL_ORDER)
    if isinstance(view.get("connector"), Mapping):
        view["connector"] = connector_view(view["connector"])
    return view


def model_view(source: Mapping[str, Any]) -> dict[str, Any]:
    """A model as ``GET`` shows it: ml-commons' ``MLModel.toXContent`` leaves out an empty node list."""
    view = model_search_view(source)
    if view.get("planning_worker_nodes") == []:
        del view["planning_worker_nodes"]
    return view


def api_version(stored: Stored) -> int:
    """The ``_version`` the real node shows: one for the create, and one for each write, counting those
    ml-commons makes of a model in the background (a deploy is two).  Kept in the document, so that it reads
    the same on both stores (the OpenSearch store's own version packs ``_seq_no``)."""
    return 1 + int(stored.source.get(WRITES, 0))


def write_result(index: str, doc_id: str, version: int, result: str, refresh: bool) -> dict[str, Any]:
    """A write's answer; ``version`` is the document's before the write."""
    body: dict[str, Any] = {"_index": index, "_id": doc_id, "_version": version + 1, "result": result}
    if refresh:
        body["forced_refresh"] = True
    body["_shards"] = {"total": 1, "successful": 1, "failed": 0}
    body["_seq_no"] = version
    body["_primary_term"] = 1
    return body


def written_view(written: WriteResult) -> dict[str, Any]:
    return write_result(written.index, written.doc_id, written.version, written.result, written.refresh)


def found_view(found: Found) -> dict[str, Any]:
    return search_response(found.results, found.took, index=found.index)


def document_view(doc: ConnectorDoc | ModelDoc | TaskDoc | GroupDoc) -> dict[str, Any]:
    """A document's fields that have a value, in its order; a model's own connector as a connector shows."""
    view: dict[str, Any] = {}
    for f in fields(doc):
        value = getattr(doc, f.name)
        if value is not None:
            view[f.name] = document_view(value) if isinstance(value, ConnectorDoc) else value
    return view


def model_doc_view(doc: ModelDoc) -> dict[str, Any]:
    """A model as ``GET`` shows it: ml-commons' ``MLModel.toXContent`` leaves out an empty node list."""
    view = document_view(doc)
    if view.get("planning_worker_nodes") == []:
        del view["planning_worker_nodes"]
    return view


def group_doc_view(doc: GroupDoc) -> dict[str, Any]:
    """``MLModelGroup.toXContent``: no empty ``backend_roles``."""
    view = document_view(doc)
    if not view.get("backend_roles"):
        view.pop("backend_roles", None)
    return view


def connector_created_view(created: ConnectorCreated) -> dict[str, Any]:
    return {"connector_id": created.connector_id}


def registered_view(registered: ModelRegistered) -> dict[str, Any]:
    return {"task_id": registered.task_id, "status": "CREATED", "model_id": registered.model_id}


def deployed_view(deployed: ModelDeployed) -> dict[str, Any]:
    return {"task_id": deployed.task_id, "task_type": "DEPLOY_MODEL", "status": "COMPLETED"}


def undeployed_view(undeployed: Undeployed) -> dict[str, Any]:
    """Per node, each model's outcome; nothing at all when the call named no model."""
    return {undeployed.node_id: {"stats": dict(undeployed.stats)}} if undeployed.stats else {}


def group_created_view(created: GroupCreated) -> dict[str, Any]:
    return {"model_group_id": created.model_group_id, "status": "CREATED"}


def group_updated_view(updated: GroupUpdated) -> dict[str, Any]:
    return {"status": "Updated"}


def tensor_view(tensor: Tensor) -> dict[str, Any]:
    view: dict[str, Any] = {"name": tensor.name}
    if tensor.data_type is not None:
        view["data_type"] = tensor.data_type
    if tensor.shape is not None:
        view["shape"] = list(tensor.shape)
    if tensor.data is not None:
        view["data"] = list(tensor.data)
    if tensor.data_as_map is not None:
        view["dataAsMap"] = tensor.data_as_map
    return view


def inference_view(inference: Inference) -> dict[str, Any]:
    view: dict[str, Any] = {"output": [tensor_view(t) for t in inference.output]}
    if inference.status_code is not None:
        view["status_code"] = inference.status_code
    return view


def predictions_view(predictions: Predictions) -> dict[str, Any]:
    return {"inference_results": [inference_view(r) for r in predictions.results]}
