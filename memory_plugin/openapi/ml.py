"""ML Commons' connectors, models and tasks."""

from __future__ import annotations

from memory_plugin.openapi.ml_model_groups import model_group_operations, model_update_operation
from memory_plugin.openapi.shapes import (
    ANY_OBJECT,
    INTEGER,
    STRING,
    UNSCOPED,
    Api,
    Schema,
    array,
    each,
    json_object,
    query_param,
    ref,
)

MODELS = Api("models and connectors", ("400", "401", "404"))


def ml_operations() -> Schema:
    action = json_object(
        {
            "action_type": {"enum": ["predict", "execute", "PREDICT", "EXECUTE"]},
            **each(STRING, "method", "url", "request_body", "pre_process_function", "post_process_function"),
            "headers": ref("StringMap"),
        },
        required=("action_type", "method", "url"),
    )
    connector = json_object(
        {
            **each(STRING, "name", "description", "version"),
            "protocol": {"enum": ["http", "aws_sigv4"]},
            "parameters": ANY_OBJECT,
            "credential": ref("StringMap"),
            "actions": array(action),
        }
    )
    register = json_object(
        {
            **each(STRING, "name", "description", "version", "model_group_id", "connector_id", "model_format"),
            "function_name": STRING,
            "connector": connector,
        },
        required=("name",),
    )
    predict = json_object(
        {
            "parameters": ANY_OBJECT,
            "text_docs": array(STRING),
            "return_number": {"type": "boolean"},
            "target_response": array(STRING),
        }
    )
    results = json_object({"inference_results": array(ANY_OBJECT)})
    search = MODELS.op(
        "Search with an OpenSearch query body", ref("SearchResponse"), ref("SearchBody"), body_required=False
    )
    write = json_object({**each(STRING, "_index", "_id"), "_version": INTEGER, "result": STRING})
    connectors, models = "/_plugins/_ml/connectors", "/_plugins/_ml/models"
    return {
        connectors + "/_create": {
            "post": MODELS.op(
                "Create a connector (credentials are encrypted and never shown)",
                json_object({"connector_id": STRING}),
                connector,
                errors=UNSCOPED,
            )
        },
        connectors + "/_search": {"get": search, "post": search},
        connectors + "/{connector_id}": {
            "get": MODELS.op("Get a connector", ANY_OBJECT),
            "put": MODELS.op("Update a connector", write, connector),
            "delete": MODELS.op("Delete a connector", write, errors=(*MODELS.errors, "409")),
        },
        models + "/_register": {
            "post": MODELS.op(
                "Register a remote model, or the built-in text embedding model",
                json_object(each(STRING, "task_id", "status", "model_id")),
                register,
                errors=UNSCOPED,
                parameters=[query_param("deploy", {"type": "boolean"})],
            )
        },
        models + "/_search": {"get": search, "post": search},
        models + "/{model_id}": {
            "get": MODELS.op("Get a model", ANY_OBJECT),
            "put": model_update_operation(),
            "delete": MODELS.op("Delete an undeployed model", write),
        },
        models + "/{model_id}/_deploy": {
            "post": MODELS.op("Deploy a model", json_object(each(STRING, "task_id", "task_type", "status")))
        },
        models + "/{model_id}/_undeploy": {"post": MODELS.op("Undeploy a model", ANY_OBJECT)},
        models + "/_undeploy": {
            "post": MODELS.op(
                "Undeploy models (model_ids; without it, every deployed one)",
                ANY_OBJECT,
                json_object({"model_ids": array(STRING)}),
                body_required=False,
                errors=UNSCOPED,
            )
        },
        models + "/{model_id}/_predict": {
            "post": MODELS.op("Call a model: parameters for a remote one, text_docs to embed", results, predict)
        },
        "/_plugins/_ml/_predict/{algorithm}/{model_id}": {
            "post": MODELS.op("Embed text_docs (algorithm text_embedding)", results, predict)
        },
        "/_plugins/_ml/tasks/{task_id}": {
            "get": MODELS.op("Get a register or deploy task", ANY_OBJECT),
            "delete": MODELS.op("Delete a task", write),
        },
        "/_plugins/_ml/tasks/_search": {"get": search, "post": search},
        **model_group_operations(),
    }
