"""The errors ml-commons' model and connector APIs answer with."""

from __future__ import annotations

from typing import Any

from memory_plugin.errors import InvalidArgument, ServiceError


class StatusError(ServiceError):
    """ml-commons' ``OpenSearchStatusException`` with the status it names."""

    type = "status_exception"

    def __init__(self, reason: str, status: int, *, parameter: str | None = None) -> None:
        super().__init__(reason, parameter=parameter)
        self.status = status  # type: ignore[misc]  # per instance: a remote service's status passes through


class NotFound(StatusError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, 404)


class StatusBadRequest(StatusError):
    def __init__(self, reason: str, *, parameter: str | None = None) -> None:
        super().__init__(reason, 400, parameter=parameter)


class WrongType(InvalidArgument):
    """A field that is not the JSON type ml-commons reads (where the real node answers a 500)."""

    type = "x_content_parse_exception"


class ParsingError(InvalidArgument):
    """OpenSearch's ``parsing_exception``: a token other than the one expected, where it stands in the body."""

    type = "parsing_exception"

    def __init__(self, reason: str, *, at: tuple[int, int] | None = None, parameter: str | None = None) -> None:
        super().__init__(reason, parameter=parameter)
        self.at = at

    def opensearch_body(self) -> dict[str, Any]:
        body = super().opensearch_body()
        if self.at is not None:
            line, col = self.at
            body["error"]["root_cause"][0].update(line=line, col=col)
            body["error"].update(line=line, col=col)
        return body
