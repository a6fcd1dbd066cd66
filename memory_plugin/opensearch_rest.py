"""How OpenSearch's REST layer answers before and after a handler runs.

These rules belong to OpenSearch itself, not to ml-commons: how it parses an
integer parameter (Java's ``Integer.parseInt``), how it words unknown
parameters (with "did you mean" from Lucene's Levenshtein similarity), which
content types it reads, and how ``filter_path`` trims a response.  Clients
that talk to OpenSearch meet exactly these, so the ``/_plugins`` API here
follows them.  Nothing in this module knows aiohttp.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from memory_plugin.errors import OpenSearchBadRequest

#: Parameters OpenSearch's REST layer reads on every request.
RESPONSE_PARAMS = frozenset({"pretty", "human", "error_trace", "filter_path", "format"})
#: Media types OpenSearch reads as JSON (YAML, CBOR and SMILE are not served here).
JSON_MEDIA_TYPES = re.compile(r"application/(json|x-ndjson|vnd\.(opensearch|elasticsearch)\+json)")


def java_int(raw: str) -> int:
    """``Integer.parseInt(raw)``: a sign, then decimal digits of any script, within 32 bits."""
    if raw.isascii() and raw.isdigit() and len(raw) < 10:  # what clients send: read at once
        return int(raw)
    body = raw[1:] if raw[:1] in ("+", "-") else raw
    digits = [unicodedata.decimal(char, None) for char in body]
    if not body or None in digits:
        raise number_format(raw)
    value = 0
    for digit in digits:
        assert digit is not None
        value = value * 10 + digit
    value = -value if raw.startswith("-") else value
    if not -(2**31) <= value < 2**31:
        raise number_format(raw)
    return value


def number_format(raw: str) -> OpenSearchBadRequest:
    return OpenSearchBadRequest(f'For input string: "{raw}"', exception="number_format_exception")


def similarity(a: str, b: str) -> float:
    """Lucene's ``LevenshteinDistance.getDistance``: 1 - edits / the longer length."""
    if not a or not b:
        return 1.0 if a == b else 0.0
    previous = list(range(len(a) + 1))
    for j, char_b in enumerate(b, 1):
        current = [j]
        for i, char_a in enumerate(a, 1):
            cost = 0 if char_a == char_b else 1
            current.append(min(current[i - 1] + 1, previous[i] + 1, previous[i - 1] + cost))
        previous = current
    return 1.0 - previous[-1] / max(len(a), len(b))


def unrecognized(uri_path: str, invalid: Iterable[str], candidates: Iterable[str]) -> str:
    """``BaseRestHandler.unrecognized``: each unknown name, sorted, with the near misses it may mean."""
    names = sorted(set(invalid))
    parts = []
    for name in names:
        scored = sorted(
            ((similarity(name, candidate), candidate) for candidate in set(candidates)),
            key=lambda pair: (-pair[0], pair[1]),
        )
        keys = [candidate for score, candidate in scored if score > 0.5]
        part = f"[{name}]"
        if len(keys) == 1:
            part += f" -> did you mean [{keys[0]}]?"
        elif keys:
            part += f" -> did you mean any of [{', '.join(keys)}]?"
        parts.append(part)
    plural = "s" if len(names) > 1 else ""
    return f"request [{uri_path}] contains unrecognized parameter{plural}: " + ", ".join(parts)


# -- filter_path ---------------------------------------------------------------------


def filter_path(document: Any, expression: str) -> Any:
    """``document`` trimmed as OpenSearch's ``filter_path`` trims a response.

    Comma-separated dotted paths; ``*`` matches within a name, ``**`` any depth;
    a leading ``-`` excludes.  Arrays are looked through, and objects or arrays
    left with nothing in them are dropped.
    """
    paths = [part.strip() for part in expression.split(",") if part.strip()]
    includes = [_segments(path) for path in paths if not path.startswith("-")]
    excludes = [_segments(path[1:]) for path in paths if path.startswith("-")]
    result = document
    if includes:
        result = _keep(result, includes)
    if excludes and result is not _NOTHING:
        result = _drop(result, excludes)
    return {} if result is _NOTHING else result


_NOTHING: Any = object()


def _segments(path: str) -> list[re.Pattern[str] | None]:
    """Each dotted name as a pattern; None stands for ``**``."""
    return [
        None if part == "**" else re.compile(".*".join(map(re.escape, part.split("*")))) for part in path.split(".")
    ]


def _advance(
    patterns: list[list[re.Pattern[str] | None]], name: str
) -> tuple[bool, list[list[re.Pattern[str] | None]]]:
    """Whether ``name`` completes a path, and the paths still open below it."""
    complete = False
    below: list[list[re.Pattern[str] | None]] = []
    for pattern in patterns:
        if not pattern:
            continue
        head, rest = pattern[0], pattern[1:]
        if head is None:  # ** matches here and below
            below.append(pattern)
            done, deeper = _advance([rest], name)
            complete = complete or done
            below.extend(deeper)
        elif head.fullmatch(name):
            if rest:
                below.append(rest)
            else:
                complete = True
    return complete, below


def _keep(value: Any, patterns: list[list[re.Pattern[str] | None]]) -> Any:
    if isinstance(value, list):
        kept = [item for item in (_keep(item, patterns) for item in value) if item is not _NOTHING]
        return kept if kept else _NOTHING
    if not isinstance(value, dict):
        return _NOTHING
    result = {}
    for key, child in value.items():
        complete, below = _advance(patterns, key)
        if complete:
            result[key] = child
        elif below:
            kept = _keep(child, below)
            if kept is not _NOTHING:
                result[key] = kept
    return result if result else _NOTHING


def _drop(value: Any, patterns: list[list[re.Pattern[str] | None]]) -> Any:
    if isinstance(value, list):
        return [_drop(item, patterns) for item in value]
    if not isinstance(value, dict):
        return value
    result = {}
    for key, child in value.items():
        complete, below = _advance(patterns, key)
        if complete:
            continue
        result[key] = _drop(child, below) if below else child
    return result
