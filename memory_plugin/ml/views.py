"""The wire shapes of ml-commons' documents: what get and ``_search`` show, in ml-commons' key order,
the index names and mappings its searches see, and the answers of its writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_plugin.dsl.mapping import DATE, FLAT_OBJECT, KEYWORD, LONG, TEXT, Fields
from memory_plugin.ml.stores.base import Stored

CONNECTOR_INDEX = ".plugins-ml-connector"
MODEL_INDEX = ".plugins-ml-model"
MODEL_GROUP_INDEX = ".plugins-ml-model-group"
TASK_INDEX = ".plugins-ml-task"
#: Writes a document has had since its create, kept in it: what its ``_version`` counts.
WRITES = "_writes"
CONNECTOR_ORDER = (
    "name",
    "version",
    "description",
    "protocol",
    "parameters",
    "actions",
    "created_time",
    "last_updated_time",
    "client_config",
)
MODEL_ORDER = (
    "name",
    "model_group_id",
    "algorithm",
    "model_version",
    "model_format",
    "description",
    "model_state",
    "model_config",
    "rate_limiter",
    "created_time",
    "last_updated_time",
    "last_deployed_time",
    "last_undeployed_time",
    "model_id",
    "auto_redeploy_retry_times",
    "planning_worker_node_count",
    "current_worker_node_count",
    "planning_worker_nodes",
    "deploy_to_all_nodes",
    "is_hidden",
    "connector_id",
    "connector",
    "guardrails",
)
TASK_ORDER = (
    "model_id",
    "task_type",
    "function_name",
    "state",
    "worker_node",
    "create_time",
    "last_update_time",
    "is_async",
)


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
    body: dict[str, Any] = {"_index": index, "_id": doc_id, "_version": version + 1, "result": result}
    if refresh:
        body["forced_refresh"] = True
    body["_shards"] = {"total": 1, "successful": 1, "failed": 0}
    body["_seq_no"] = version
    body["_primary_term"] = 1
    return body
