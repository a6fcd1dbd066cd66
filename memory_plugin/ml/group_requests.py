"""Model group bodies (``MLRegisterModelGroupInput``, ``MLUpdateModelGroupInput``), read as ml-commons reads them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_plugin.errors import ContentParseError, InvalidArgument, ParseFailure, ParsingError
from memory_plugin.ml.requests import expect_object, java_text, token_of

PUBLIC, PRIVATE, RESTRICTED = "public", "private", "restricted"
ACCESS_MODES = (PUBLIC, PRIVATE, RESTRICTED)
MAX_BACKEND_ROLES = 256


@dataclass(frozen=True)
class GroupInput:
    """``MLRegisterModelGroupInput`` / ``MLUpdateModelGroupInput``: None where the body left a field out."""

    name: str | None
    description: str | None
    backend_roles: list[str] | None
    access_mode: str | None
    add_all_backend_roles: bool | None

    @property
    def changes_access(self) -> bool:
        return self.access_mode is not None or self.add_all_backend_roles is not None or self.backend_roles is not None


def parse_group_input(body: Any) -> GroupInput:
    """Read as ml-commons' ``parse`` reads it; an access mode it does not know is refused (ml-commons drops it)."""
    if body is None:
        raise ParseFailure("Model group request has empty body")
    body = expect_object(body)
    roles = body.get("backend_roles")
    if "backend_roles" in body:
        if not isinstance(roles, list):
            raise ParsingError(
                f"Failed to parse object: expecting token of type [START_ARRAY] but found [{token_of(roles)}]",
                parameter="backend_roles",
            )
        if len(roles) > MAX_BACKEND_ROLES:
            raise InvalidArgument(
                f"[backend_roles] holds more than {MAX_BACKEND_ROLES} roles", parameter="backend_roles"
            )
        roles = [java_text(role, "backend_roles") for role in roles]
    mode = None
    if "access_mode" in body:
        mode = java_text(body["access_mode"], "access_mode").lower()
        if mode not in ACCESS_MODES:
            raise InvalidArgument("Wrong access value", parameter="access_mode")
    add_all = body.get("add_all_backend_roles")
    if isinstance(add_all, str) and add_all in ("true", "false"):  # ``parser.booleanValue()`` reads these too
        add_all = add_all == "true"
    if add_all is not None and not isinstance(add_all, bool):
        raise ContentParseError(
            f"[add_all_backend_roles] must be a boolean, found [{token_of(add_all)}]", parameter="add_all_backend_roles"
        )
    return GroupInput(
        name=java_text(body["name"], "name") if "name" in body else None,
        description=java_text(body["description"], "description") if "description" in body else None,
        backend_roles=roles,
        access_mode=mode,
        add_all_backend_roles=add_all,
    )
