"""JSON in and out: strict parsing of what callers send, and strict JSON for what goes back.

A stdlib ``import json`` elsewhere is unaffected: this module is only ever
imported by its full name, ``memory_plugin.http.json``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from memory_plugin.errors import InvalidArgument, ParseFailure
from memory_plugin.jackson import DuplicateField, unique_fields

#: The ceiling on JSON nesting, so that a hostile body cannot exhaust the stack.
MAX_JSON_DEPTH = 64
#: Python's own ceiling on converting digits to an int (``sys.get_int_max_str_digits``).
MAX_INT_DIGITS = 4300


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=encode_json(body), status=status, content_type="application/json")


#: Built once; our bodies are trees of fresh dicts and lists, never circular, so nothing tracks visits.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)


def encode_json(body: Any) -> bytes:
    """Strict JSON as UTF-8, whatever the body holds.

    ``Infinity`` and ``NaN`` are not JSON, and most clients refuse them: an
    infinite float becomes the largest finite double of its sign (so that
    scores keep their order) and NaN becomes null.  A lone surrogate cannot be
    encoded as UTF-8; one stored before the edge refused them is written as
    its JSON escape (``\\ud800``), so that the record can still be read and deleted.
    """
    try:
        text = _ENCODER.encode(body)
    except ValueError:
        text = _ENCODER.encode(_finite(body))
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else math.copysign(sys.float_info.max, value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds half of a UTF-16 pair (``"\\ud800"``): not text, and not encodable as UTF-8.

    Encoding is the fast test (a regex over the surrogate range is a hundred times slower).
    """
    if text.isascii():
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def printable(text: str) -> str:
    """``text`` with lone surrogates written as escapes, so that it can go into a response."""
    return text.encode("utf-8", "backslashreplace").decode()


class _Rejected(ValueError):
    """Raised by the JSON parser's hook; its message goes to the caller as is."""


def _reject_constant(name: str) -> Any:
    raise _Rejected(f"{name} is not a JSON number; numbers must be finite")


#: Built once: ``json.loads`` with a hook builds a decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=unique_fields)


def parse_json(text: str | bytes, *, what: str = "request body", parameter: str | None = None) -> Any:
    """Strict JSON for everything a caller sends: the body, and the ``source`` parameter.

    Valid UTF-8, finite numbers of at most 4300 digits, no ``NaN`` or
    ``Infinity``, at most 64 levels of nesting, and no lone surrogate in any
    string or key (``"\\ud800"`` parses, but is not text, and would poison what
    is stored).  Anything else is a 400 naming the place.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseFailure(f"{what} is not valid UTF-8 (byte {exc.start})", parameter=parameter) from None
    try:
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _DECODER.decode(text)
    except RecursionError:
        raise ParseFailure(f"{what} nests deeper than {MAX_JSON_DEPTH} levels", parameter=parameter) from None
    except json.JSONDecodeError as exc:
        raise ParseFailure(
            f"Failed to parse {what}: {exc.msg} at line {exc.lineno} column {exc.colno}", parameter=parameter
        ) from None
    except _Rejected as exc:
        raise ParseFailure(f"Failed to parse {what}: {exc}", parameter=parameter) from None
    except DuplicateField as exc:
        raise ParseFailure(f"Failed to parse {what}: Duplicate field '{exc}'", parameter=parameter) from None
    except ValueError:  # int() refuses more digits than sys.get_int_max_str_digits()
        raise ParseFailure(
            f"Failed to parse {what}: a number has more than {MAX_INT_DIGITS} digits", parameter=parameter
        ) from None
    check_sound(value, what=what, parameter=parameter)
    return value


def check_sound(value: Any, *, what: str = "request body", parameter: str | None = None) -> None:
    """``parse_json``'s rules (depth, finite numbers, no lone surrogate) for a value another parser read."""
    if not _sound(value, what, parameter):
        _name_the_culprit(value, what, parameter)


def _sound(value: Any, what: str, parameter: str | None) -> bool:
    """The fast pass: depth (raised at once), then whether any string, key or number is bad."""
    if not _sound_scalar(value):
        return False
    stack: list[tuple[Any, int]] = [(value, 0)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth >= MAX_JSON_DEPTH:
            raise ParseFailure(f"{what} nests deeper than {MAX_JSON_DEPTH} levels", parameter=parameter)
        if isinstance(item, dict):
            if not all(key.isascii() for key in item) and any(has_lone_surrogate(key) for key in item):
                return False
            children = item.values()
        else:
            children = item
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
            elif not _sound_scalar(child):
                return False
    return True


def _sound_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return not has_lone_surrogate(value)
    if isinstance(value, float):
        return math.isfinite(value)
    return True


#: Where a value sits, as a chain of (parent, key or index) links.
_Path = tuple["_Path", str | int] | None


def _name_the_culprit(value: Any, what: str, parameter: str | None) -> None:
    """The slow pass, once something is known to be bad: find it, and say where."""
    stack: list[tuple[Any, _Path]] = [(value, None)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str) and has_lone_surrogate(item):
            _poisoned(what, parameter, path, key=False)
        if isinstance(item, float) and not math.isfinite(item):
            place = _spelt(path, parameter)
            raise ParseFailure(
                f"Failed to parse {what}: [{place or what}] is out of range; numbers must be finite",
                parameter=place or parameter,
            )
        if isinstance(item, dict):
            for key, child in item.items():
                if has_lone_surrogate(key):
                    _poisoned(what, parameter, (path, key), key=True)
                stack.append((child, (path, key)))
        elif isinstance(item, list):
            stack.extend((child, (path, index)) for index, child in enumerate(item))


def _spelt(path: _Path, parameter: str | None) -> str:
    steps: list[str | int] = []
    while path is not None:
        path, step = path
        steps.append(step)
    return json_path(reversed(steps), root=parameter or "")


def _poisoned(what: str, parameter: str | None, path: _Path, *, key: bool) -> None:
    place = _spelt(path, parameter)
    detail = f"{'the key ' if key else ''}[{place}]" if place else what
    raise InvalidArgument(
        f"{detail} holds a lone surrogate (half of a UTF-16 pair); text must be valid Unicode",
        parameter=place or parameter,
    )


def json_path(path: Iterable[str | int], root: str = "") -> str:
    """``records[0].metadata.x``: where a value sits in a JSON document."""
    text = root
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{printable(step)}" if text else printable(step))
    return text
