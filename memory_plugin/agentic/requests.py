"""Request validation of the agentic memory API: the JSON field readers, with ml-commons' own error strings,
that ``container_requests`` and ``memory_requests`` parse request bodies with."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from memory_plugin.errors import ContentParseError, InvalidArgument, QueryShardFailure

T = TypeVar("T")

#: A request's JSON object body; None when the request had none.
Body = Mapping[str, Any] | None
#: A JSON object whose fields are the caller's or a stored document's (``parameters``, ``metadata``, a
#: container's ``configuration``): passed on and stored as it is.
JsonObject = dict[str, Any]


def required(body: Body) -> Mapping[str, Any]:
    if body is None:
        raise InvalidArgument("Request body is required")
    return body


def without_nested(query: Any, nested: frozenset[str]) -> Any:
    """``nested`` queries evaluate their inner query (objects of an array are matched as one flattened doc).

    Only an inner query that is an object is unwrapped: a ``nested`` without one stays, for the parser's 400
    (unwrapped, ``"query": null`` would read as no query, and a delete by query would delete everything).
    A path that is not one of the index's ``nested`` objects is refused as the shard refuses it (matching
    every document instead deleted them all by query), or matches nothing with ``ignore_unmapped``."""
    if isinstance(query, dict):
        if (
            set(query) == {"nested"}
            and isinstance(query["nested"], dict)
            and isinstance(query["nested"].get("query"), dict)
        ):
            path = query["nested"].get("path")
            if isinstance(path, str) and path not in nested:
                if query["nested"].get("ignore_unmapped") is True:
                    return {"match_none": {}}
                raise QueryShardFailure(f"[nested] failed to find nested object under path [{path}]")
            return without_nested(query["nested"]["query"], nested)
        return {key: without_nested(value, nested) for key, value in query.items()}
    if isinstance(query, list):
        return [without_nested(item, nested) for item in query]
    return query


# -- JSON field readers ---------------------------------------------------------------


def _kind(value: Any) -> str:
    return {
        bool: "VALUE_BOOLEAN",
        int: "VALUE_NUMBER",
        float: "VALUE_NUMBER",
        dict: "START_OBJECT",
        list: "START_ARRAY",
        str: "VALUE_STRING",
    }.get(type(value), "VALUE_NULL")


def _of_type(body: Mapping[str, Any], name: str, kind: type[T], expected: str) -> T | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, kind):
        raise ContentParseError(f"[{name}] must be {expected}, found [{_kind(value)}]", parameter=name)
    return value


def text(body: Mapping[str, Any], name: str) -> str | None:
    return _of_type(body, name, str, "a string")


def boolean(body: Mapping[str, Any], name: str, default: bool | None = None) -> bool | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ContentParseError(f"[{name}] must be a boolean, found [{_kind(value)}]", parameter=name)
    return value


def integer(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise ContentParseError(f"[{name}] must be an integer, found [{_kind(value)}]", parameter=name)
    if not -(2**31) <= value < 2**31:
        raise ContentParseError(f"[{name}] is out of range for an int: [{value}]", parameter=name)
    return int(value)


def number(body: Mapping[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) == float("inf"):
        raise ContentParseError(f"[{name}] must be a finite number, found [{_kind(value)}]", parameter=name)
    return float(value)


def obj(body: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return _of_type(body, name, dict, "an object")


def string_map(body: Mapping[str, Any], name: str) -> dict[str, str] | None:
    """A flat string map; other values are stringified as ml-commons does (objects as compact JSON)."""
    value = obj(body, name)
    if value is None:
        return None
    out: dict[str, str] = {}
    for key, item in value.items():
        if item is None:
            continue
        if isinstance(item, str):
            out[key] = item
        elif isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, int | float):
            out[key] = str(item)
        else:
            out[key] = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
    return out


def string_list(body: Mapping[str, Any], name: str) -> list[str] | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ContentParseError(f"[{name}] must be an array of strings", parameter=name)
    return list(value)
