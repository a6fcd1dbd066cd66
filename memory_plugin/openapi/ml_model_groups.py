"""ML Commons' model groups, and the model update."""

from __future__ import annotations

from memory_plugin.openapi.shapes import (
    ANY_OBJECT,
    BOOLEAN,
    INTEGER,
    STRING,
    UNSCOPED,
    Api,
    Schema,
    array,
    each,
    json_object,
    ref,
)

GROUPS = Api("model groups", ("400", "401", "404"))
WRITE = json_object({**each(STRING, "_index", "_id"), "_version": INTEGER, "result": STRING})


def model_update_operation() -> Schema:
    """``PUT /_plugins/_ml/models/{model_id}``: beside the model's get and delete."""
    update = json_object(each(STRING, "name", "description", "model_group_id", "connector_id"))
    return GROUPS.op(
        "Update a model: name, description, model group or stand-alone connector",
        WRITE,
        update,
        errors=(*GROUPS.errors, "403", "409"),
    )


def model_group_operations() -> Schema:
    group = {
        **each(STRING, "name", "description"),
        "backend_roles": array(STRING),
        "access_mode": {"enum": ["public", "private", "restricted"]},
        "add_all_backend_roles": BOOLEAN,
    }
    search = GROUPS.op(
        "Search the model groups the caller may use", ref("SearchResponse"), ref("SearchBody"), body_required=False
    )
    groups = "/_plugins/_ml/model_groups"
    return {
        groups + "/_register": {
            "post": GROUPS.op(
                "Register a model group (private unless shared by access_mode or backend_roles)",
                json_object(each(STRING, "model_group_id", "status")),
                json_object(group, required=("name",)),
                errors=UNSCOPED,
            )
        },
        groups + "/_search": {"get": search, "post": search},
        groups + "/{model_group_id}": {
            "get": GROUPS.op("Get a model group", ANY_OBJECT, errors=(*GROUPS.errors, "403")),
            "put": GROUPS.op("Update a model group", json_object({"status": STRING}), json_object(group)),
            "delete": GROUPS.op("Delete a model group that holds no model", WRITE, errors=(*GROUPS.errors, "409")),
        },
    }
