"""Model groups as ml-commons 2.19 serves them with model access control on (``MLModelGroupManager``,
``TransportUpdateModelGroupAction``, ``DeleteModelGroupTransportAction``, ``ModelAccessControlHelper``).

A group belongs to its creator and is shared within the creator's organisation by its ``access``:
``public`` (every key of the organisation), ``private`` (the owner), ``restricted`` (keys holding one of
its ``backend_roles``).  The organisation's key (no user) is ml-commons' ``all_access`` within it.  Another
organisation never sees a group.  A group the caller may not see is absent (404), as a container is.
"""

from __future__ import annotations

import time
from dataclasses import fields
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.dsl import SearchBody, bounded, execute
from memory_plugin.dsl.mapping import DATE, KEYWORD, LONG, TEXT, UNMAPPED, Fields
from memory_plugin.errors import InvalidArgument, StatusError, StatusNotFound
from memory_plugin.ml.config import now_millis
from memory_plugin.ml.group_requests import PRIVATE, PUBLIC, RESTRICTED, GroupInput
from memory_plugin.ml.results import Found, GroupCreated, GroupDoc, GroupUpdated, WriteResult
from memory_plugin.ml.stores.base import MLStore, Owned
from memory_plugin.ml.views import MODEL_GROUP_INDEX, WRITES, api_version

GROUP_ORDER = tuple(f.name for f in fields(GroupDoc))
#: ``index-mappings/ml_model_group.json``.  ``owner`` is nested there, so a query on its fields outside a
#: ``nested`` query matches nothing, as here.
GROUP_FIELDS: Fields = {
    "name": TEXT,
    "name.keyword": KEYWORD,
    "latest_version": LONG,
    "description": TEXT,
    "model_group_id": KEYWORD,
    "backend_roles": TEXT,
    "backend_roles.keyword": KEYWORD,
    "access": KEYWORD,
    **dict.fromkeys(("owner", "owner.name", "owner.name.keyword", "owner.backend_roles", "owner.roles"), UNMAPPED),
    "created_time": DATE,
    "last_updated_time": DATE,
}

NO_PERMISSION = "You don't have permissions to perform this operation on this model."


def permitted(group: Owned, caller: Principal) -> bool:
    """``checkModelGroupPermission`` (the organisation's key is ``all_access``): public, the private group's
    owner, or a key holding one of a restricted group's roles."""
    if caller.organization_admin:
        return True
    access = group.stored.source.get("access", PRIVATE)
    if access == PUBLIC:
        return True
    if access == RESTRICTED:
        return bool(set(caller.backend_roles) & set(group.stored.source.get("backend_roles") or ()))
    return group.owner == caller


def visible(group: Owned, caller: Principal) -> bool:
    """What the caller can tell exists: a group it may use, or its own (even after losing the group's roles)."""
    return group.owner == caller or permitted(group, caller)


def owner_view(caller: Principal) -> dict[str, Any] | None:
    """ml-commons' ``User`` as a group keeps it; the organisation's key is no user."""
    if caller.user_id is None:
        return None
    return {
        "name": caller.user_id,
        "backend_roles": list(caller.backend_roles),
        "roles": [],
        "custom_attribute_names": [],
        "user_requested_tenant": None,
    }


def group_source(
    caller: Principal, name: str, description: str | None, access: str, roles: list[str] | None
) -> dict[str, Any]:
    now = now_millis()
    source: dict[str, Any] = {"name": name, "latest_version": 0}
    if description is not None:
        source["description"] = description
    if roles:
        source["backend_roles"] = roles
    owner = owner_view(caller)
    if owner is not None:
        source["owner"] = owner
    source.update(access=access, created_time=now, last_updated_time=now)
    return source


def group_search_view(source: dict[str, Any]) -> dict[str, Any]:
    """A group as ``_search`` shows it: its stored fields (an empty ``backend_roles`` too)."""
    return {key: source[key] for key in GROUP_ORDER if key in source}


def _check_register_access(found: GroupInput, caller: Principal) -> tuple[str, list[str] | None]:
    """``MLModelGroupManager.validateRequestForAccessControl``, in its order: the access mode and the roles."""
    admin = caller.organization_admin
    roles, add_all = found.backend_roles, found.add_all_backend_roles is True
    mode = found.access_mode
    if mode is None:
        if roles and add_all:
            raise InvalidArgument("You cannot specify backend roles and add all backend roles at the same time.")
        mode = RESTRICTED if add_all or roles else PRIVATE
    if mode in (PUBLIC, PRIVATE) and (roles or add_all):
        raise InvalidArgument("You can specify backend roles only for a model group with the restricted access mode.")
    if mode == RESTRICTED:
        if admin and add_all:
            raise InvalidArgument("Admin users cannot add all backend roles to a model group.")
        if not admin and not caller.backend_roles:
            raise InvalidArgument("You must have at least one backend role to register a restricted model group.")
        if not roles and not add_all:
            raise InvalidArgument(
                "You must specify one or more backend roles or add all backend roles to register a restricted model group."
            )
        if roles and add_all:
            raise InvalidArgument("You cannot specify backend roles and add all backend roles at the same time.")
        if not admin and not add_all and not set(caller.backend_roles) >= set(roles or ()):
            raise InvalidArgument("You don't have the backend roles specified.")
    return mode, list(caller.backend_roles) if add_all else roles


def _check_update_access(found: GroupInput, caller: Principal, group: Owned) -> None:
    """``TransportUpdateModelGroupAction.validateRequestForAccessControl``, in its order."""
    admin, owner = caller.organization_admin, group.owner == caller
    if found.changes_access and not owner and not admin:
        raise InvalidArgument("Only owner or admin can update access control data.")
    if owner and not admin and not permitted(group, caller):
        raise InvalidArgument(
            "You don't have the specified backend role to update this model group. "
            "For more information, contact your administrator."
        )
    mode, roles, add_all = found.access_mode, found.backend_roles, found.add_all_backend_roles
    if mode in (PUBLIC, PRIVATE) and (roles or add_all is True):
        raise InvalidArgument("You can specify backend roles only for a model group with the restricted access mode.")
    if mode in (None, RESTRICTED):
        if admin and add_all is True:
            raise InvalidArgument("Admin users cannot add all backend roles to a model group.")
        if add_all is True and not caller.backend_roles:
            raise InvalidArgument("You don't have any backend roles.")
        if not roles and add_all is False:
            raise InvalidArgument("You have to specify backend roles when add all backend roles is set to false.")
        if roles and add_all is True:
            raise InvalidArgument("You cannot specify backend roles and add all backend roles at the same time.")
        if mode == RESTRICTED and not roles and add_all is not True:
            raise InvalidArgument(
                "You must specify one or more backend roles or add all backend roles to register a restricted model group."
            )
        if not admin and roles and not set(caller.backend_roles) >= set(roles):
            raise InvalidArgument("You don't have the backend roles specified.")


class ModelGroups:
    """The model group APIs over the ml store; no HTTP here."""

    def __init__(self, store: MLStore) -> None:
        self.store = store

    async def _named(self, organization_id: str, name: str) -> Owned | None:
        """``validateUniqueModelGroupName``: a term on ``name.keyword`` over the whole organisation."""
        groups = await self.store.organization("model_group", organization_id)
        return next((g for g in groups if g.stored.source.get("name") == name), None)

    async def find(self, caller: Principal, group_id: str) -> Owned | None:
        """The group if the caller can tell it exists, else None."""
        group = await self.store.find("model_group", caller.organization_id, group_id)
        return group if group is not None and visible(group, caller) else None

    async def register(self, caller: Principal, found: GroupInput) -> GroupCreated:
        if found.name is None:
            raise InvalidArgument("model group name must not be null", parameter="name")
        taken = await self._named(caller.organization_id, found.name)
        if taken is not None:
            raise InvalidArgument(
                f"The name you provided is already being used by a model group with ID: {taken.stored.id}.",
                parameter="name",
            )
        access, roles = _check_register_access(found, caller)
        group_id = new_id()
        source = group_source(caller, found.name, found.description, access, roles)
        await self.store.create("model_group", caller, group_id, source)
        return GroupCreated(group_id)

    async def get(self, caller: Principal, group_id: str) -> GroupDoc:
        group = await self.find(caller, group_id)
        if group is None:
            raise StatusNotFound(f"Failed to find model group with the provided model group id: {group_id}")
        if not permitted(group, caller):
            raise StatusError("User doesn't have privilege to perform this operation on this model group", 403)
        return GroupDoc.of(group.stored.source)

    async def update(self, caller: Principal, group_id: str, found: GroupInput) -> GroupUpdated:
        group = await self.find(caller, group_id)
        if group is None:
            raise StatusNotFound(f"Failed to find model group with the provided model group id: {group_id}")
        _check_update_access(found, caller, group)
        source = dict(group.stored.source)
        if found.access_mode is not None:
            source["access"] = found.access_mode
            if found.access_mode != RESTRICTED:
                source["backend_roles"] = []
        elif found.backend_roles is not None or found.add_all_backend_roles is True:
            source["access"] = RESTRICTED
        if found.backend_roles is not None:
            source["backend_roles"] = found.backend_roles
        if found.add_all_backend_roles is True:
            source["backend_roles"] = list(caller.backend_roles)
        if source.get("access") == RESTRICTED and not source.get("backend_roles"):
            # ml-commons would keep a restricted group with no roles, which then fails every access check
            raise InvalidArgument(
                "You must specify one or more backend roles or add all backend roles to register a restricted model group."
            )
        if found.description is not None and found.description.strip():
            source["description"] = found.description
        if found.name is not None and found.name.strip() and found.name != source.get("name"):
            taken = await self._named(caller.organization_id, found.name)
            if taken is not None:
                raise InvalidArgument(
                    f"The name you provided is already being used by another model with ID: {taken.stored.id}. "
                    "Please provide a different name",
                    parameter="name",
                )
            source["name"] = found.name
        if source == group.stored.source:  # the node's update detects a no-op and writes nothing
            return GroupUpdated(changed=False)
        source[WRITES] = source.get(WRITES, 0) + 1
        if not await self.store.replace("model_group", group.owner, group.stored, source):
            raise StatusError("the model group was changed by another request; read it again", 409)
        return GroupUpdated(changed=True)

    async def delete(self, caller: Principal, group_id: str) -> WriteResult:
        """``DeleteModelGroupTransportAction`` with access control: an absent group is its validation's 404."""
        group = await self.find(caller, group_id)
        if group is None:
            raise StatusNotFound("Fail to find model group")
        if not permitted(group, caller):
            raise InvalidArgument("User doesn't have privilege to delete this model group")
        models = await self.store.organization("model", caller.organization_id)
        if any(m.stored.source.get("model_group_id") == group_id for m in models):
            raise StatusError("Cannot delete the model group when it has associated model versions", 409)
        if not await self.store.delete("model_group", group.owner, group_id):
            raise StatusNotFound("Fail to find model group")
        return WriteResult(MODEL_GROUP_INDEX, group_id, api_version(group.stored), "deleted", refresh=True)

    async def search(self, caller: Principal, query: SearchBody) -> Found:
        """``SearchModelGroupTransportAction``: the query over the groups the caller may see."""
        started = time.perf_counter()
        groups = await self.store.organization("model_group", caller.organization_id)
        documents = [
            (g.stored.id, group_search_view(g.stored.source), api_version(g.stored))
            for g in groups
            if visible(g, caller)
        ]
        results = await bounded(lambda budget: execute(query, documents, budget=budget))
        return Found(MODEL_GROUP_INDEX, results, int((time.perf_counter() - started) * 1000))

    # -- what model registration and update need ----------------------------------------------

    async def usable(self, caller: Principal, group_id: str, missing: str) -> Owned:
        """The group a model joins: absent is ``missing`` (404), visible but not usable ml-commons' refusal."""
        group = await self.find(caller, group_id)
        if group is None:
            raise StatusNotFound(missing)
        if not permitted(group, caller):
            raise InvalidArgument(NO_PERMISSION)
        return group

    async def own_or_usable_named(self, caller: Principal, name: str) -> Owned | None:
        """The group a model registered without ``model_group_id`` joins: the caller's own group of its name,
        else one of that name it may use."""
        groups = [
            g
            for g in await self.store.organization("model_group", caller.organization_id)
            if g.stored.source.get("name") == name
        ]
        return next((g for g in groups if g.owner == caller), None) or next(
            (g for g in groups if permitted(g, caller)), None
        )

    async def next_version(self, group: Owned) -> str:
        """Take the group's next model version (compare-and-set: concurrent registers get distinct versions)."""
        current: Owned | None = group
        for _ in range(8):
            if current is None:
                raise StatusNotFound("Model group not found")
            version = int(current.stored.source.get("latest_version", 0)) + 1
            updated = {
                **current.stored.source,
                "latest_version": version,
                "last_updated_time": now_millis(),
                WRITES: current.stored.source.get(WRITES, 0) + 1,
            }
            if await self.store.replace("model_group", current.owner, current.stored, updated):
                return str(version)
            current = await self.store.find("model_group", current.owner.organization_id, current.stored.id)
        raise StatusError("the model group is being written by other requests; try again", 409)

    async def create_for_model(self, caller: Principal, name: str) -> str:
        """A new private group named after the model, holding its first version."""
        group_id = new_id()
        source = group_source(caller, name, None, PRIVATE, None)
        source["latest_version"] = 1
        await self.store.create("model_group", caller, group_id, source)
        return group_id
