"""``PUT /_plugins/_ml/models/{model_id}``, as ml-commons 2.19 answers it (``RestMLUpdateModelAction``,
``UpdateModelTransportAction``): name, description, a move to another model group and a new stand-alone
connector.  The other fields ml-commons updates act on predict (rate limit, guardrails, interface,
``is_enabled``) or on a local model's loading; those are refused by name rather than stored and ignored.
"""

from __future__ import annotations

from memory_plugin.auth import Principal
from memory_plugin.errors import StatusBadRequest, StatusError, StatusNotFound
from memory_plugin.ml.config import now_millis
from memory_plugin.ml.model_groups import ModelGroups, permitted
from memory_plugin.ml.model_requests import ModelUpdateInput
from memory_plugin.ml.results import WriteResult
from memory_plugin.ml.stores.base import MLStore
from memory_plugin.ml.views import MODEL_INDEX, WRITES, api_version


async def update_model(
    store: MLStore, groups: ModelGroups, owner: Principal, model_id: str, update: ModelUpdateInput
) -> WriteResult:
    """``UpdateModelTransportAction``: the checks that need the model, in its order, then the write."""
    stored = await store.get("model", owner, model_id)
    if stored is None:
        raise StatusNotFound(f"Failed to find model to update with the provided model id: {model_id}")
    model = stored.source
    if model.get("model_state") == "DEPLOYING":
        raise StatusError(
            f"Model is deploying. Please wait for the model to complete deployment. model ID {model_id}", 409
        )
    current_group = await store.find("model_group", owner.organization_id, model.get("model_group_id", ""))
    if current_group is not None and not permitted(current_group, owner):
        raise StatusError(
            f"User doesn't have privilege to perform this operation on this model, model ID {model_id}", 403
        )
    new_connector = update.connector_id or None
    if model.get("algorithm") != "REMOTE" and (new_connector is not None or update.has_connector):
        raise StatusBadRequest("Trying to update the connector or connector_id field on a local model.")
    if update.unserved:
        raise StatusBadRequest(
            f"[{update.unserved[0]}] cannot be updated on this server: update the model's "
            "name, description, model_group_id or connector_id",
            parameter=update.unserved[0],
        )
    source = dict(model)
    if new_connector is not None:
        if not model.get("connector_id"):
            raise StatusBadRequest(
                "This remote does not have a connector_id field, maybe it uses an internal connector."
            )
        if await store.get("connector", owner, new_connector) is None:
            raise StatusNotFound(f"Failed to find connector:{new_connector}")
        source["connector_id"] = new_connector
    new_group = update.model_group_id or None
    if new_group is not None and new_group != model.get("model_group_id"):
        target = await groups.find(owner, new_group)
        if target is None:
            raise StatusNotFound(
                "Failed to find the model group with the provided model group id in the update model input, "
                f"MODEL_GROUP_ID: {new_group}"
            )
        if not permitted(target, owner):
            raise StatusError(
                "User Doesn't have privilege to re-link this model to the target model group due to no access to "
                f"the target model group with model group ID {new_group}",
                403,
            )
        source["model_group_id"] = new_group
        source["model_version"] = await groups.next_version(target)
    if update.name is not None:
        source["name"] = update.name
    if update.description is not None:
        source["description"] = update.description
    source["model_id"] = model_id  # ml-commons' partial update writes its input's model_id into the model
    source["last_updated_time"] = now_millis()
    source[WRITES] = model.get(WRITES, 0) + 1
    if not await store.replace("model", owner, stored, source):
        raise StatusError("the model was changed by another request; read it again", 409)
    return WriteResult(MODEL_INDEX, model_id, api_version(stored), "updated", refresh=False)
