"""Custom ``memory_container_id`` on create (ml-commons 3.9, ``MLResourceIdUtils.validateCustomDocumentId``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memory_plugin.errors import ContentParseError, InvalidArgument, java_is_blank

MAX_DOCUMENT_ID_LENGTH = 512
_PATTERN = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]*")
LABEL = "memory container id"


def validate_custom_id(value: str, label: str = LABEL) -> str:
    """ml-commons' checks, in its order, with its messages (each a 400 ``illegal_argument_exception``)."""
    if java_is_blank(value):  # Java's isBlank: a no-break space is not blank, so it fails the pattern below
        raise InvalidArgument(f"{label} is invalid", parameter="memory_container_id")
    if value.startswith("_"):
        raise InvalidArgument(f"{label} must not start with '_'", parameter="memory_container_id")
    if value.startswith("-"):
        raise InvalidArgument(f"{label} must not start with '-'", parameter="memory_container_id")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_ID_LENGTH:
        raise InvalidArgument(
            f"{label} is too long, max length is {MAX_DOCUMENT_ID_LENGTH}", parameter="memory_container_id"
        )
    if not _PATTERN.fullmatch(value):
        raise InvalidArgument(
            f"{label} must contain only letters, digits, underscores, and hyphens, and must start with a letter "
            "or digit",
            parameter="memory_container_id",
        )
    return value


def custom_container_id(body: Mapping[str, Any]) -> str | None:
    """The id a create asks for, validated; None when omitted (or null).  A number is read as its text, as
    ``parser.text()`` reads it; an object or array is a parse error."""
    value = body.get("memory_container_id")
    if value is None:
        return None
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, int | float):
        value = str(value)
    elif not isinstance(value, str):
        raise ContentParseError("[memory_container_id] must be a string", parameter="memory_container_id")
    return validate_custom_id(value)
