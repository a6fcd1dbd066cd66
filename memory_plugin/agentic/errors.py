"""The error types ml-commons' agentic memory answers with (``status_exception`` and friends), each a kind of
the service error of its status in ``memory_plugin.errors``."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from memory_plugin import errors
from memory_plugin.errors import InvalidArgument, ParseFailure, ServiceError


class StatusException(ServiceError):
    """ml-commons' ``OpenSearchStatusException``: a subclass names its status, whose words make its code and title."""

    type = "status_exception"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        phrase = HTTPStatus(cls.status).phrase
        cls.code, cls.title = phrase.lower().replace(" ", "_"), phrase.capitalize()


class StatusBadRequest(InvalidArgument):
    """A 400 that ml-commons raises as an ``OpenSearchStatusException`` (an invalid parameter's code and title)."""

    type = "status_exception"


class StatusNotFound(StatusException, errors.NotFound):
    """A 404 in ml-commons' own words (no ``kind [id] not found`` template)."""

    def __init__(self, reason: str) -> None:
        errors.NotFound.__init__(self, "memory", "", reason=reason)


class StatusForbidden(StatusException, errors.Forbidden):
    """A 403 as ml-commons raises it: a ``status_exception``, not the security plugin's."""


class Conflict(StatusException):
    status = 409


class UpstreamFailed(StatusException):
    """The configured LLM connector failed where the caller waits for it (a session summary)."""

    status = 502


class ContentParseError(InvalidArgument):
    """A field of the wrong JSON type (OpenSearch's ``x_content_parse_exception``)."""

    type = "x_content_parse_exception"


class IndexNameError(ParseFailure):
    """A bad index prefix or backend role (``parse_exception``)."""
