"""Request bodies of the model and connector APIs, read as ml-commons' parsers read them.

ml-commons reads most fields with ``parser.text()``: a number or boolean is
taken as its text (``"version": 1`` is ``"1"``), unknown fields are skipped,
and an object, array or null where text is expected is a 500 on the real node;
here it is a 400 naming the field.  The checks run in ml-commons' order, so the
first error a body hits is the one the real node reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memory_plugin.errors import ContentParseError, InvalidArgument, OpenSearchBadRequest, ParseFailure, ParsingError
from memory_plugin.http.json import check_sound
from memory_plugin.jackson import JsonSyntaxError, Lexer, Token, syntax_error, unique_fields

#: Bounds for what one connector keeps: generous for real connectors, small enough that none weighs on a store.
MAX_MAP_ENTRIES = 256
MAX_TEXT_CHARS = 64 * 1024


def token_of(value: Any) -> str:
    if value is None:
        return "VALUE_NULL"
    if isinstance(value, bool):
        return "VALUE_BOOLEAN"
    if isinstance(value, int | float):
        return "VALUE_NUMBER"
    if isinstance(value, str):
        return "VALUE_STRING"
    return "START_OBJECT" if isinstance(value, dict) else "START_ARRAY"


def java_text(value: Any, name: str) -> str:
    """``parser.text()``: a scalar's text; anything else names the field."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float):
        text = json.dumps(value)
    else:
        raise ContentParseError(f"[{name}] must be a string, found [{token_of(value)}]", parameter=name)
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidArgument(f"[{name}] is longer than {MAX_TEXT_CHARS} characters", parameter=name)
    return text


def string_map(value: Any, name: str) -> dict[str, str]:
    """``parser.mapStrings()``: an object of scalars, each as its text."""
    if not isinstance(value, dict):
        raise ContentParseError(f"[{name}] must be an object, found [{token_of(value)}]", parameter=name)
    if len(value) > MAX_MAP_ENTRIES:
        raise InvalidArgument(f"[{name}] has more than {MAX_MAP_ENTRIES} entries", parameter=name)
    return {key: java_text(item, f"{name}.{key}") for key, item in value.items()}


def parameter_map(value: Any, name: str = "parameters") -> dict[str, str]:
    """``StringUtils.getParameterMap``: text stays text, anything else becomes compact JSON."""
    if not isinstance(value, dict):
        raise ContentParseError(f"[{name}] must be an object, found [{token_of(value)}]", parameter=name)
    if len(value) > MAX_MAP_ENTRIES:
        raise InvalidArgument(f"[{name}] has more than {MAX_MAP_ENTRIES} entries", parameter=name)
    out: dict[str, str] = {}
    for key, item in value.items():
        if item is None:
            continue
        out[key] = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"), ensure_ascii=False)
    return out


def expect_object(body: Any) -> dict[str, Any]:
    """The body as an object, or the parsing error ml-commons' ``parse`` gives anything else."""
    if not isinstance(body, dict):
        raise ParsingError(
            f"Failed to parse object: expecting token of type [START_OBJECT] but found [{token_of(body)}]"
        )
    return body


def merged(base: Mapping[str, str], extra: Mapping[str, str] | None) -> dict[str, str]:
    return {**base, **(extra or {})}


#: Bodies up to this size get a line and column in a ``parsing_exception``; larger ones get the words alone.
POSITION_SCAN_BYTES = 64 * 1024


class JsonObject(dict[str, Any]):
    """A parsed request body that remembers its bytes, for errors that name a line and column."""

    raw: bytes = b""


def value_position(body: Any, key: str) -> tuple[int, int] | None:
    """Where the value of the top-level ``key`` starts in the body (line, column), as OpenSearch reports it."""
    raw = getattr(body, "raw", b"")
    if not raw or len(raw) > POSITION_SCAN_BYTES:  # the scan is Python on the event loop: small bodies only
        return None
    lexer = Lexer(raw)
    try:
        if lexer.next_token() is not Token.START_OBJECT:
            return None
        while lexer.next_token() is Token.FIELD_NAME:
            name = lexer.name
            lexer.next_token()
            if name == key:
                return lexer.token_start
            lexer.skip_children()
            if lexer.token is Token.VALUE_STRING:
                lexer.string_value()
    except JsonSyntaxError:
        return None
    return None


def parse_body(raw: bytes) -> Any:
    """A request body as JSON (None when empty); one that does not parse gets Jackson's error, as the real node's.

    Stricter than the node on purpose, as every API here (``check_sound``): a lone surrogate
    (``"\\ud800"``, which Jackson reads), a number out of a double's range or nesting deeper than 64
    levels is a 400 naming its place, never stored to break reads.
    """
    if not raw.strip():
        return None
    try:
        value = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=unique_fields)
    except (ValueError, RecursionError):  # a duplicate key too: the lexer says where, as Jackson does
        error = syntax_error(raw)
        if error is not None:
            raise OpenSearchBadRequest(error.message, exception=error.kind) from None
        raise ParseFailure("request body is not valid JSON") from None
    check_sound(value)
    if isinstance(value, dict):
        value = JsonObject(value)
        value.raw = raw
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")
