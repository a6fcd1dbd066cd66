"""The ML services' typed results, rendered: ml-commons' key order, no null, and what each get leaves out."""

from __future__ import annotations

import json

from memory_plugin.ml.results import (
    ConnectorDoc,
    GroupDoc,
    Inference,
    ModelDoc,
    Predictions,
    Tensor,
    Undeployed,
    WriteResult,
)
from memory_plugin.ml.views import (
    document_view,
    group_doc_view,
    model_doc_view,
    model_search_view,
    predictions_view,
    undeployed_view,
    written_view,
)

STORED_MODEL = {
    "_writes": 3,
    "is_hidden": False,
    "name": "m",
    "algorithm": "REMOTE",
    "model_state": "UNDEPLOYED",
    "planning_worker_nodes": [],
    "description": None,
    "model_group_id": "g",
    "connector": {
        "credential": {"key": "sealed"},
        "sealed_for": "k",
        "actions": [{"action_type": "PREDICT", "method": "POST", "url": "https://x"}],
        "protocol": "http",
        "name": "c",
    },
    "created_time": 1,
}


def test_a_model_renders_in_ml_commons_order_without_nulls_bookkeeping_or_credential() -> None:
    view = model_doc_view(ModelDoc.of(STORED_MODEL))
    assert list(view) == [
        "name",
        "model_group_id",
        "algorithm",
        "model_state",
        "created_time",
        "is_hidden",
        "connector",
    ]
    assert list(view["connector"]) == ["name", "protocol", "actions"]
    # a search shows the empty node list that a get leaves out, and otherwise the same document
    searched = model_search_view(STORED_MODEL)
    assert searched.pop("planning_worker_nodes") == [] and searched == view


def test_a_connector_and_a_group_render_their_fields_only() -> None:
    connector = ConnectorDoc.of({"credential": {"k": "v"}, "version": "1", "name": "c", "_writes": 1})
    assert document_view(connector) == {"name": "c", "version": "1"}
    group = GroupDoc.of({"access": "private", "backend_roles": [], "name": "g", "latest_version": 0})
    assert list(group_doc_view(group)) == ["name", "latest_version", "access"]


def test_writes_and_undeploys_render_as_the_node_answers() -> None:
    written = written_view(WriteResult(".plugins-ml-model", "m1", 2, "deleted", refresh=True))
    assert written == {
        "_index": ".plugins-ml-model",
        "_id": "m1",
        "_version": 3,
        "result": "deleted",
        "forced_refresh": True,
        "_shards": {"total": 1, "successful": 1, "failed": 0},
        "_seq_no": 2,
        "_primary_term": 1,
    }
    assert undeployed_view(Undeployed("node", {"m1": "undeployed"})) == {"node": {"stats": {"m1": "undeployed"}}}
    assert undeployed_view(Undeployed("node", {})) == {}


def test_predictions_keep_the_remote_numbers_as_they_came() -> None:
    embedding = Tensor("sentence_embedding", "FLOAT32", (2,), [1, 0.5])
    answer = Tensor("response", data_as_map={"choices": []})
    view = predictions_view(Predictions((Inference((embedding,), 200), Inference((answer,)), Inference(()))))
    assert json.dumps(view) == json.dumps(
        {
            "inference_results": [
                {
                    "output": [{"name": "sentence_embedding", "data_type": "FLOAT32", "shape": [2], "data": [1, 0.5]}],
                    "status_code": 200,
                },
                {"output": [{"name": "response", "dataAsMap": {"choices": []}}]},
                {"output": []},
            ]
        }
    )
