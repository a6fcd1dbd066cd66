"""Typed errors shared by the services, the HTTP layer and the public API.

Services raise these and know nothing of HTTP; the HTTP layer maps each to
its status and renders it in the API's own format (OpenSearch's error body
under ``/_plugins``, Telnyx's ``errors`` list under ``/v2``).
"""

from __future__ import annotations

import base64
import errno
import hashlib
import unicodedata
from http import HTTPStatus
from typing import Any, ClassVar


class ServiceError(Exception):
    """An error a caller can act on.  ``parameter`` names the culprit."""

    status: ClassVar[int] = 500
    #: OpenSearch exception type name.
    type: ClassVar[str] = "exception"
    #: Telnyx-style error code and title.
    code: ClassVar[str] = "internal_error"
    title: ClassVar[str] = "Internal error"

    def __init__(self, reason: str, *, parameter: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parameter = parameter

    def opensearch_body(self) -> dict[str, Any]:
        cause = {"type": self.type, "reason": self.reason}
        return {"error": {"root_cause": [cause], **cause}, "status": self.status}

    def telnyx_body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "title": self.title, "detail": self.reason}
        if self.parameter is not None:
            error["source"] = {"parameter": self.parameter}
        return {"errors": [error]}


class InvalidArgument(ServiceError):
    status = 400
    type = "illegal_argument_exception"
    code = "invalid_parameter"
    title = "Invalid parameter"


class ValidationFailed(InvalidArgument):
    """A request that parsed but breaks a rule (ml-commons' request validation)."""

    type = "action_request_validation_exception"


class ParseFailure(InvalidArgument):
    """A body that is not the JSON it should be."""

    type = "parse_exception"
    code = "invalid_body"
    title = "Invalid request body"


class OpenSearchBadRequest(InvalidArgument):
    """A 400 that OpenSearch names after the exception behind it (``json_parse_exception``, ``parsing_exception``)."""

    def __init__(
        self,
        reason: str,
        *,
        exception: str,
        parameter: str | None = None,
        caused_by: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(reason, parameter=parameter)
        self.exception = exception
        self.caused_by = caused_by

    def opensearch_body(self) -> dict[str, Any]:
        cause = {"type": self.exception, "reason": self.reason}
        error: dict[str, Any] = {"root_cause": [cause], **cause}
        if self.caused_by is not None:
            error["caused_by"] = self.caused_by
        return {"error": error, "status": self.status}


class RelayedBadRequest(InvalidArgument):
    """A 400 OpenSearch itself answered to a search we passed on: its own error body, relayed."""

    def __init__(self, body: dict[str, Any]) -> None:
        error = body.get("error")
        reason = error.get("reason") if isinstance(error, dict) else error
        super().__init__(str(reason))
        self.body = body

    def opensearch_body(self) -> dict[str, Any]:
        return self.body


class ShardFailure(InvalidArgument):
    """A request that fails on the shard, not while parsing: OpenSearch wraps it in ``search_phase_execution_exception``.

    ``index`` is the index the failing shard belongs to; the single shard here is
    shard 0 of a node named after this server.
    """

    index = ""

    def opensearch_body(self) -> dict[str, Any]:
        cause = {"type": self.type, "reason": self.reason}
        return self.all_shards_failed(cause, cause, caused_by={**cause, "caused_by": cause})

    def all_shards_failed(
        self, root: dict[str, Any], shard_reason: dict[str, Any], *, caused_by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The ``search_phase_execution_exception`` body: ``root`` as the root cause, ``shard_reason`` as the
        one shard's reason, and ``caused_by`` where OpenSearch repeats the cause at the top."""
        error: dict[str, Any] = {
            "root_cause": [root],
            "type": "search_phase_execution_exception",
            "reason": "all shards failed",
            "phase": "query",
            "grouped": True,
            "failed_shards": [{"shard": 0, "index": self.index, "node": "memory-plugin", "reason": shard_reason}],
        }
        if caused_by is not None:
            error["caused_by"] = caused_by
        return {"error": error, "status": self.status}


class QueryShardFailure(ShardFailure):
    """A query the shard cannot build (``query_shard_exception``): a sort on an unmapped field, too many terms.

    OpenSearch names the index, and its uuid, in the cause, and adds the cause's own cause
    (``illegal_argument_exception``) when the refusal came from deeper down.
    """

    type = "query_shard_exception"

    def __init__(self, reason: str, *, because: str | None = None) -> None:
        super().__init__(reason)
        self.because = because

    def opensearch_body(self) -> dict[str, Any]:
        cause = {"type": self.type, "reason": self.reason, "index": self.index, "index_uuid": index_uuid(self.index)}
        return self.all_shards_failed(
            cause, cause if self.because is None else {**cause, "caused_by": _illegal(self.because)}
        )


def _illegal(reason: str) -> dict[str, str]:
    return {"type": "illegal_argument_exception", "reason": reason}


def index_uuid(index: str) -> str:
    """A stable stand-in for an index's uuid (22 characters of URL-safe base64, as OpenSearch's)."""
    return base64.urlsafe_b64encode(hashlib.sha256(index.encode()).digest()[:16]).decode()[:22]


class ShardParseFailure(ShardFailure):
    """A value the shard cannot parse (``parse_exception``), with the causes OpenSearch lists under the shard."""

    type = "parse_exception"

    def __init__(self, reason: str, caused_by: dict[str, Any]) -> None:
        super().__init__(reason)
        self.caused_by = caused_by

    @classmethod
    def date(cls, value: Any, formats: str = "strict_date_time||epoch_millis") -> ShardParseFailure:
        """A date field's key its format cannot read."""
        inner = f"failed to parse date field [{java_string(value)}] with format [{formats}]"
        parsed = {"type": "date_time_parse_exception", "reason": "Failed to parse with all enclosed parsers"}
        return cls(f"{inner}: [{inner}]", {**_illegal(inner), "caused_by": parsed})

    def opensearch_body(self) -> dict[str, Any]:
        cause = {"type": self.type, "reason": self.reason}
        return self.all_shards_failed(cause, {**cause, "caused_by": self.caused_by})


class TooManyClauses(ShardFailure):
    """More clauses than Lucene's ``maxClauseCount`` (1024) allows in one query."""

    type = "query_shard_exception"


class FetchPhaseFailure(InvalidArgument):
    """A bad value that fails in the fetch phase, after every shard answered: no shard is named, as OpenSearch says it."""

    def opensearch_body(self) -> dict[str, Any]:
        error = {
            "root_cause": [],
            "type": "search_phase_execution_exception",
            "reason": "",
            "phase": "fetch",
            "grouped": True,
            "failed_shards": [],
            "caused_by": {"type": self.type, "reason": self.reason},
        }
        return {"error": error, "status": self.status}


def java_string(value: Any) -> str:
    """``String.valueOf`` of a parsed JSON value, as OpenSearch previews it in mapping errors."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}={java_string(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java_string(item) for item in value) + "]"
    return str(value)


#: Java's ``Character.isWhitespace`` beyond the Unicode separators (which it takes, but for the no-break spaces).
_JAVA_CONTROL_WHITESPACE = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NO_BREAK_SPACES = frozenset("\u00a0\u2007\u202f")


def java_is_blank(text: str) -> bool:
    """Java 11's ``String.isBlank``: every character ``Character.isWhitespace``.  Not Python's ``isspace``, which
    also takes the no-break spaces (U+00A0, U+2007, U+202F) and U+0085, none of them blank to Java."""
    return all(
        ch in _JAVA_CONTROL_WHITESPACE
        or (unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in _NO_BREAK_SPACES)
        for ch in text
    )


class MapperParsingError(InvalidArgument):
    """A value the index mapping refuses: OpenSearch's ``mapper_parsing_exception``, worded as it words it.

    The nested cause OpenSearch adds points at a line and column of its internal merged
    document, which has no counterpart here, so the cause carries the words without them.
    """

    def __init__(self, field: str, field_type: str, document_id: str, value: Any) -> None:
        preview = value[0] if isinstance(value, list) and value and field_type == "flat_object" else value
        super().__init__(
            f"failed to parse field [{field}] of type [{field_type}] in document with id '{document_id}'. "
            f"Preview of field's value: '{java_string(preview)}'",
            parameter=field,
        )
        if field_type == "flat_object":
            token = {str: "VALUE_STRING", bool: "VALUE_BOOLEAN", dict: "START_OBJECT"}.get(
                type(preview), "VALUE_NUMBER"
            )
            self.cause = {
                "type": "parsing_exception",
                "reason": f"[{field}] unexpected token [{token}] in flat_object field value",
            }
        else:
            self.cause = {"type": "illegal_state_exception", "reason": "Can't get text on a START_OBJECT"}

    def opensearch_body(self) -> dict[str, Any]:
        top = {"type": "mapper_parsing_exception", "reason": self.reason}
        root = self.cause if self.cause["type"] == "parsing_exception" else top
        return {"error": {"root_cause": [root], **top, "caused_by": self.cause}, "status": self.status}


class ResultWindowTooLarge(ShardFailure):
    """``from + size`` past ``index.max_result_window``: OpenSearch's search phase failure, as it words it."""

    def __init__(self, window: int, index: str, limit: int = 10000) -> None:
        super().__init__(
            f"Result window is too large, from + size must be less than or equal to: [{limit}] but was [{window}]. "
            "See the scroll api for a more efficient way to request large data sets. This limit can be set by "
            "changing the [index.max_result_window] index level setting.",
            parameter="max_results",
        )
        self.index = index


class NotFound(ServiceError):
    """``kind`` (``conversation``, ``interaction``, ``record``, ...) ``id`` does not exist, or is not the caller's.

    The default reason is the 2.11 wording (``Conversation [id] not found``);
    each API form may word it its own way from ``kind`` and ``id``.
    """

    status = 404
    type = "resource_not_found_exception"
    code = "not_found"
    title = "Not found"

    def __init__(self, kind: str, id: str, *, reason: str | None = None, parameter: str | None = None) -> None:
        super().__init__(reason or f"{kind.capitalize()} [{id}] not found", parameter=parameter)
        self.kind = kind
        self.id = id


class Conflict(ServiceError):
    """Another request holds, or took over, what this one changes; retrying is safe."""

    status = 409
    type = "status_exception"
    code = "conflict"
    title = "Conflict"


def storage_error(error: BaseException) -> ServiceError | None:
    """The typed error a storage failure means to a caller, or None if it is not one we know.

    A full disk is a 507; a data folder that cannot be written (read-only,
    permissions, gone) is a 503.  Either way the write was not stored.
    """
    if isinstance(error, OSError) and error.errno is not None:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return InsufficientStorage("the data folder is full; the write was not stored")
        if error.errno in (errno.EROFS, errno.EACCES):
            return Unavailable("the data folder cannot be written; the write was not stored")
        return None
    message = str(error).lower()
    if "disk is full" in message or "disk i/o error" in message:
        return InsufficientStorage("the data folder is full; the write was not stored")
    if "readonly" in message or "read-only" in message or "unable to open" in message:
        return Unavailable("the data folder cannot be written; the write was not stored")
    return None


class Unauthorized(ServiceError):
    status = 401
    type = "security_exception"
    code = "unauthorized"
    title = "Unauthorized"


class Forbidden(ServiceError):
    """A valid credential that does not grant this."""

    status = 403
    type = "security_exception"
    code = "forbidden"
    title = "Forbidden"


class PayloadTooLarge(ServiceError):
    status = 413
    type = "content_too_long_exception"
    code = "payload_too_large"
    title = "Payload too large"


class Unavailable(ServiceError):
    status = 503
    type = "status_exception"
    code = "service_unavailable"
    title = "Service unavailable"


class InsufficientStorage(ServiceError):
    status = 507
    type = "insufficient_storage_exception"
    code = "insufficient_storage"
    title = "Insufficient storage"


class ClientClosedRequest(ServiceError):
    """A client that closed its connection mid-body; nobody reads the answer (nginx's 499, in the logs)."""

    status = 499
    type = "client_closed_request_exception"
    code = "client_closed_request"
    title = "Client closed request"


class RequestTimeout(ServiceError):
    """A client that stopped sending its body."""

    status = 408
    type = "timeout_exception"
    code = "request_timeout"
    title = "Request timeout"


# ml-commons' own errors: an ``OpenSearchStatusException`` is a ``status_exception`` whatever its status.


def _status_words(status: int) -> tuple[str, str]:
    """The Telnyx code and title of an HTTP status (``not_found``, ``Not found``)."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        return ServiceError.code, ServiceError.title
    return phrase.lower().replace(" ", "_").replace("-", "_"), phrase.capitalize()


class StatusError(ServiceError):
    """ml-commons' ``OpenSearchStatusException``: a subclass names its status; an instance may carry another
    (a remote service's status passes through)."""

    type = "status_exception"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "status" in cls.__dict__:
            cls.code, cls.title = _status_words(cls.status)

    def __init__(self, reason: str, status: int | None = None, *, parameter: str | None = None) -> None:
        super().__init__(reason, parameter=parameter)
        if status is not None:
            self.status = status  # type: ignore[misc]  # per instance
            self.code, self.title = _status_words(status)  # type: ignore[misc]


class StatusBadRequest(InvalidArgument):
    """A 400 that ml-commons raises as an ``OpenSearchStatusException`` (an invalid parameter's code and title)."""

    type = "status_exception"


class StatusNotFound(StatusError, NotFound):
    """A 404 in ml-commons' own words (no ``kind [id] not found`` template)."""

    status = 404

    def __init__(self, reason: str) -> None:
        NotFound.__init__(self, "resource", "", reason=reason)


class StatusForbidden(StatusError, Forbidden):
    """A 403 as ml-commons raises it: a ``status_exception``, not the security plugin's."""

    status = 403


class UpstreamFailed(StatusError):
    """The configured LLM connector failed where the caller waits for it (a session summary)."""

    status = 502


class ContentParseError(InvalidArgument):
    """A field of the wrong JSON type (OpenSearch's ``x_content_parse_exception``), where the real node may
    answer a 500."""

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
