"""2.12+ request bodies, read the way ml-commons 2.19 reads them.

ml-commons reads each body its own way: a new memory through ``parser.map()``
and Java casts, a new message token by token with ``text()`` (so numbers and
booleans become their JSON text), updates through ``map()`` with a silent
allow-list.  What it accepts, we accept with the same effect; what it refuses
with a 4xx, we refuse with the same exception name and words.  Where it fails
with a 500, or stores a value that then breaks its own reads, we answer a 400
that names the field (the deviations listed in ``tests/conformance/deviations.py``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from memory_plugin.errors import InvalidArgument, OpenSearchBadRequest, ParseFailure
from memory_plugin.jackson import MAX_NUMBER_LENGTH, JsonSyntaxError, Lexer, Token, unique_fields
from memory_plugin.memory.models import MESSAGE_TEXT_FIELDS, java_blank

AT_LEAST_ONE = (
    "At least one of the following parameters must be non-empty: "
    "input, prompt_template, response, origin, additional_info"
)


def _syntax(error: JsonSyntaxError, *, wrapped: bool = False) -> OpenSearchBadRequest:
    """Jackson's error as OpenSearch reports it; ``wrapped`` where ml-commons rethrows it as a parse_exception."""
    return OpenSearchBadRequest(error.message, exception="parse_exception" if wrapped else error.kind)


# -- parser.map(): a new memory, and updates -------------------------------------------


def _java_class(value: Any) -> str:
    """The class Jackson's ``map()`` gives a JSON value."""
    if isinstance(value, bool):
        return "java.lang.Boolean"
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return "java.lang.Integer"
        return "java.lang.Long" if -(2**63) <= value < 2**63 else "java.math.BigInteger"
    if isinstance(value, float):
        return "java.lang.Double"
    if isinstance(value, list):
        return "java.util.ArrayList"
    if isinstance(value, dict):
        return "java.util.HashMap"
    return "java.lang.String"


def _cast(value: Any, target: str) -> Any:
    """Java's ``(String) value`` or ``(Map) value``: null passes, anything else of the wrong class fails."""
    if value is None:
        return None
    wanted = {"java.lang.String": str, "java.util.Map": dict}[target]
    if isinstance(value, wanted):
        return value
    have = _java_class(value)
    raise ParseFailure(
        f"class {have} cannot be cast to class {target} ({have} and {target} are in module java.base "
        "of loader 'bootstrap')",
        parameter=None,
    )


def _first_value(raw: bytes) -> tuple[Token | None, Any]:
    """The first JSON value of ``raw`` as Jackson reads it: the rest of the body is never looked at."""
    try:
        value = json.loads(
            raw,
            parse_int=_short_int,
            parse_float=_short_float,
            parse_constant=_no_constant,
            object_pairs_hook=unique_fields,
        )
        return _token_of(value), value
    except (ValueError, RecursionError):
        pass  # the lexer says why, in Jackson's words
    lexer = Lexer(raw)
    token = lexer.next_token()
    if token is Token.START_OBJECT:
        return token, lexer.read_value()
    return token, None


def check_search_syntax(raw: bytes) -> None:
    """A search body that does not parse: Jackson's error, as OpenSearch answers it
    (``json_e_o_f_exception`` for a truncated body), where Jackson refuses it too."""
    try:
        _first_value(raw)
    except JsonSyntaxError as error:
        raise _syntax(error) from None


def _short_int(text: str) -> int:
    if len(text) > MAX_NUMBER_LENGTH:
        raise ValueError(text)
    return int(text)


def _short_float(text: str) -> float:
    if len(text) > MAX_NUMBER_LENGTH:
        raise ValueError(text)
    return float(text)


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _token_of(value: Any) -> Token:
    if isinstance(value, dict):
        return Token.START_OBJECT
    if isinstance(value, list):
        return Token.START_ARRAY
    if isinstance(value, str):
        return Token.VALUE_STRING
    if isinstance(value, bool):
        return Token.VALUE_BOOLEAN
    return Token.VALUE_NULL if value is None else Token.VALUE_NUMBER


@dataclass(frozen=True)
class NewMemory:
    name: str | None = None
    application_type: str | None = None
    additional_info: dict[str, Any] | None = None


def new_memory(raw: bytes) -> NewMemory:
    """``CreateConversationRequest.fromRestRequest``: without a name, nothing else is kept either."""
    if not raw.strip():
        return NewMemory()
    try:
        token, body = _first_value(raw)
    except JsonSyntaxError as error:
        raise _syntax(error, wrapped=True) from None
    if token is not Token.START_OBJECT:
        return NewMemory()  # map() of anything but an object is empty
    name = _cast(body.get("name"), "java.lang.String")
    application_type = _cast(body.get("application_type"), "java.lang.String")
    additional_info = _cast(body.get("additional_info"), "java.util.Map")
    if name is None:
        return NewMemory()
    return NewMemory(
        name=None if java_blank(name) else name,
        application_type=None if java_blank(application_type) else application_type,
        additional_info=additional_info or None,
    )


def update(raw: bytes, noun: str) -> dict[str, Any]:
    """An update's body as ``parser.map()``; ml-commons' allow-list is applied by the service."""
    if not raw.strip():
        raise ParseFailure(f"Failed to update {noun}: Request body is empty")
    try:
        token, body = _first_value(raw)
    except JsonSyntaxError as error:
        raise _syntax(error) from None
    if token is not Token.START_OBJECT:
        raise OpenSearchBadRequest(
            f"Failed to parse object: expecting token of type [START_OBJECT] but found [{_name(token)}]",
            exception="parsing_exception",
        )
    assert isinstance(body, dict)
    return body


def _name(token: Token | None) -> str:
    if token is Token.VALUE_BOOLEAN:
        return "VALUE_TRUE"
    return "null" if token is None else token.value


# -- a new message: token by token -----------------------------------------------------


@dataclass(frozen=True)
class NewMessage:
    input: str | None
    prompt_template: str | None
    response: str | None
    origin: str | None
    additional_info: dict[str, str] | None
    parent_message_id: str | None
    trace_number: int | None


def _text(lexer: Lexer, field: str) -> str:
    """Jackson's ``text()``: strings as they are, numbers and booleans as written."""
    token = lexer.token
    if token is Token.VALUE_STRING:
        return lexer.string_value()
    if token in (Token.VALUE_NUMBER, Token.VALUE_BOOLEAN):
        return lexer.text
    what = {Token.START_OBJECT: "an object", Token.START_ARRAY: "an array"}.get(token, "null") if token else "null"
    raise InvalidArgument(f"[{field}] must be a string, number or boolean, not {what}", parameter=field)


def _map_strings(lexer: Lexer, field: str) -> dict[str, str]:
    """``mapStrings()``: an object's values as text; anything but an object reads as empty."""
    if lexer.token is not Token.START_OBJECT:
        if lexer.token is Token.START_ARRAY:  # ml-commons then loses its place in the body: a 500
            raise InvalidArgument(f"[{field}] must be an object, not an array", parameter=field)
        return {}
    values: dict[str, str] = {}
    while lexer.next_token() is Token.FIELD_NAME:
        key = lexer.text
        lexer.next_token()
        values[key] = _text(lexer, f"{field}.{key}")
    return values


def _int_value(lexer: Lexer, field: str) -> int:
    """``intValue(false)``: whole numbers only, never from a string."""
    token = lexer.token
    if token is Token.VALUE_STRING:
        raise InvalidArgument("Integer value passed as String", parameter=field)
    if token is not Token.VALUE_NUMBER:
        current = f"VALUE_{lexer.text.upper()}" if token is Token.VALUE_BOOLEAN else _name(token)
        raise OpenSearchBadRequest(
            f"Current token ({current}) not numeric, can not use numeric value accessors{lexer.location()}",
            exception="json_parse_exception",
            parameter=field,
        )
    number = float(lexer.text)
    if not (math.isfinite(number) and -(2**31) <= number < 2**31):  # ml-commons: an input_coercion 500
        raise InvalidArgument(f"[{field}] is out of range of int: {lexer.text}", parameter=field)
    if number != int(number):
        raise InvalidArgument(
            f"{_java_double(number)} cannot be converted to Integer without data loss", parameter=field
        )
    return int(number)


def _java_double(number: float) -> str:
    """Java's ``Double.toString``: plain between 10^-3 and 10^7, else ``d.dddE±n``; shortest digits."""
    sign, digits, exponent = Decimal(repr(number)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    power = len(text) + exponent - 1
    if -3 <= power < 7:
        plain = f"{abs(Decimal(repr(number))):f}"
        whole, _, fraction = plain.partition(".")
        body = f"{whole}.{fraction.rstrip('0') or '0'}"
    else:
        body = f"{text[0]}.{text[1:] or '0'}E{power}"
    return ("-" if sign else "") + body


def new_message(raw: bytes) -> NewMessage:
    """``CreateInteractionRequest.fromRestRequest``, field by field in the body's order."""
    if not raw.strip():
        raise ParseFailure("request body is required")
    lexer = Lexer(raw)
    fields: dict[str, Any] = {}
    additional_info: dict[str, str] = {}
    try:
        token = lexer.next_token()
        if token is not Token.START_OBJECT:
            raise OpenSearchBadRequest(
                f"Failed to parse object: expecting token of type [START_OBJECT] but found [{_name(token)}]",
                exception="parsing_exception",
            )
        while lexer.next_token() is Token.FIELD_NAME:
            field = lexer.text
            lexer.next_token()
            if field in MESSAGE_TEXT_FIELDS or field == "parent_message_id":
                fields[field] = _text(lexer, field)
            elif field == "additional_info":
                additional_info = _map_strings(lexer, field)
            elif field == "trace_number":
                fields[field] = _int_value(lexer, field)
            else:
                lexer.skip_children()
    except JsonSyntaxError as error:
        raise _syntax(error) from None
    texts = {name: fields.get(name) for name in MESSAGE_TEXT_FIELDS}
    if all(java_blank(value) for value in texts.values()) and not additional_info:
        raise InvalidArgument(AT_LEAST_ONE)
    return NewMessage(
        **{name: None if java_blank(value) else value for name, value in texts.items()},
        additional_info=additional_info or None,
        parent_message_id=fields.get("parent_message_id"),
        trace_number=fields.get("trace_number"),
    )
