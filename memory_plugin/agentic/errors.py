"""The error types ml-commons' agentic memory answers with (``status_exception`` and friends)."""

from __future__ import annotations

from memory_plugin.errors import InvalidArgument, ParseFailure, ServiceError


class StatusBadRequest(InvalidArgument):
    """A 400 that ml-commons raises as an ``OpenSearchStatusException``."""

    type = "status_exception"


class StatusNotFound(ServiceError):
    """A 404 in ml-commons' own words (no ``kind [id] not found`` template)."""

    status = 404
    type = "status_exception"
    code = "not_found"
    title = "Not found"


class Forbidden(ServiceError):
    status = 403
    type = "status_exception"
    code = "forbidden"
    title = "Forbidden"


class Conflict(ServiceError):
    status = 409
    type = "status_exception"
    code = "conflict"
    title = "Conflict"


class ContentParseError(InvalidArgument):
    """A field of the wrong JSON type (OpenSearch's ``x_content_parse_exception``)."""

    type = "x_content_parse_exception"


class IndexNameError(ParseFailure):
    """A bad index prefix or backend role (``parse_exception``)."""


class UpstreamFailed(ServiceError):
    """The configured LLM connector failed where the caller waits for it (a session summary)."""

    status = 502
    type = "status_exception"
    code = "bad_gateway"
    title = "Bad gateway"


def container_not_found() -> StatusNotFound:
    return StatusNotFound("Memory container not found")
