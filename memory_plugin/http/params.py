"""Query parameters and path parts: valid text, only the names an endpoint knows, numbers read strictly.

OpenSearch's rules under ``/_plugins`` (Java's ``Integer.parseInt``, its
"unrecognized parameter" wording), stricter and simpler ones under ``/v2``.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

from aiohttp import web

from memory_plugin.errors import InvalidArgument, OpenSearchBadRequest
from memory_plugin.http.apis import TELNYX, api_of
from memory_plugin.http.json import has_lone_surrogate, printable
from memory_plugin.opensearch_rest import RESPONSE_PARAMS, java_int, unrecognized

#: Parameters OpenSearch accepts on every endpoint; clients send them.
#: A search may carry its body in the ``source`` parameter instead.
SEARCH_PARAMS = ("source", "source_content_type")
GLOBAL_PARAMS = frozenset({"pretty", "human", "error_trace", "filter_path", "source", "source_content_type"})
#: Query-parameter numbers: ASCII digits only (no ``+``, ``_``, spaces or other scripts' digits).
INTEGER = re.compile(r"-?[0-9]{1,20}")
DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?")


def check_text(request: web.Request) -> None:
    """Query parameters and path parts must be valid Unicode text, like JSON bodies."""
    raw_query = request.rel_url.raw_query_string
    if raw_query and not (raw_query.isascii() and "%" not in raw_query):  # else every name and value is ASCII
        if any("\ufffd" in name or "\ufffd" in value for name, value in request.query.items()):
            _check_query_encoding(request)
        for name, value in request.query.items():
            if has_lone_surrogate(name):
                raise InvalidArgument(
                    f"a query parameter name {printable(name)} holds a lone surrogate", parameter=printable(name)
                )
            if has_lone_surrogate(value):
                raise InvalidArgument(f"[{name}] holds a lone surrogate; it must be valid Unicode text", parameter=name)
    for name, value in request.match_info.items():
        if has_lone_surrogate(value):
            raise InvalidArgument(f"[{name}] holds a lone surrogate; it must be valid Unicode text", parameter=name)


def _check_query_encoding(request: web.Request) -> None:
    """The query string as sent must be UTF-8: the parser replaced what was not with U+FFFD."""
    for pair in request.rel_url.raw_query_string.split("&"):
        raw_name, _, raw_value = pair.partition("=")
        name = urllib.parse.unquote(raw_name.replace("+", " "), errors="replace")
        for part in (raw_name, raw_value):
            try:
                urllib.parse.unquote_to_bytes(part.replace("+", " ")).decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidArgument(f"[{name}] is not valid UTF-8 once percent-decoded", parameter=name) from None


def check_params(request: web.Request, allowed: Iterable[str] = (), prefixes: Iterable[str] = ()) -> None:
    """Reject query parameters the endpoint does not know, as OpenSearch does."""
    if not request.query:
        return
    prefixes = tuple(prefixes)
    if api_of(request) is TELNYX:
        known = GLOBAL_PARAMS | set(allowed)
        unknown = [name for name in request.query if name not in known and not name.startswith(prefixes or ("\0",))]
        if unknown:
            names = ", ".join(dict.fromkeys(unknown))
            raise InvalidArgument(f"unknown query parameter [{names}]", parameter=unknown[0])
        return
    read = RESPONSE_PARAMS | set(request.match_info)  # what OpenSearch's handler reads, and so suggests
    known = read | set(allowed)
    unknown = [name for name in request.query if name not in known and not name.startswith(prefixes or ("\0",))]
    if unknown:
        raise InvalidArgument(unrecognized(request.path, unknown, read), parameter=sorted(unknown)[0])
    if request.query.get("format", "json") != "json":
        raise InvalidArgument(
            f"format [{request.query['format']}] is not served here; only [json] is", parameter="format"
        )


def int_param(request: web.Request, name: str, default: int, *, number_format: bool = False) -> int:
    """An integer parameter.  Under ``/_plugins`` it is read as Java's ``Integer.parseInt`` reads it,
    and a failure is worded as ``RestRequest.paramAsInt`` words it, or (``number_format``) left as
    the bare ``NumberFormatException`` that ml-commons 2.12+ lets through.  ``/v2`` takes ASCII digits only.
    """
    raw = request.query.get(name)
    if raw is None:
        return default
    if api_of(request) is not TELNYX:
        try:
            return java_int(raw)
        except OpenSearchBadRequest:
            if number_format:
                raise
            raise _int_param_error(name, raw) from None
    value = int(raw) if INTEGER.fullmatch(raw) else None
    if value is None or not -(2**31) <= value < 2**31:
        raise _int_param_error(name, raw)
    return value


def _int_param_error(name: str, raw: str) -> InvalidArgument:
    """Made only on failure: every paged request reads two integer parameters."""
    return InvalidArgument(f"Failed to parse int parameter [{name}] with value [{raw}]", parameter=name)


def float_param(request: web.Request, name: str) -> float | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    if not DECIMAL.fullmatch(raw):
        raise InvalidArgument(f"Failed to parse float parameter [{name}] with value [{raw}]", parameter=name)
    value = float(raw)
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidArgument(f"[{name}] must be a finite number, not [{raw}]", parameter=name)
    return value
