"""``highlight``: the matched terms of each hit's text fields wrapped in tags, as the unified highlighter does.

The terms come from the query's scoring and filtering clauses on that field
(never from ``must_not``), as Lucene's query visitor collects them.  A value no
longer than ``fragment_size`` is one fragment; a longer one is cut into
sentences, and those holding a match are returned in text order, at most
``number_of_fragments`` of them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memory_plugin.dsl.analysis import analyze_with_offsets
from memory_plugin.dsl.scoring import as_keyword
from memory_plugin.dsl.values import QueryParsingError, field_values, token_name

HIGHLIGHT_OPTIONS = frozenset(
    {
        "pre_tags",
        "post_tags",
        "fragment_size",
        "number_of_fragments",
        "type",
        "require_field_match",
        "order",
        "encoder",
        "no_match_size",
        "boundary_scanner",
        "fragmenter",
        "tags_schema",
    }
)
SENTENCE = re.compile(r"[^.!?]*(?:[.!?]+\s*|$)")


@dataclass(frozen=True)
class Highlight:
    fields: tuple[str, ...]
    pre_tag: str = "<em>"
    post_tag: str = "</em>"
    fragment_size: int = 100
    number_of_fragments: int = 5

    def fields_of(self, source: Mapping[str, Any]) -> list[str]:
        names = list(_paths(source))
        return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in self.fields)]


def _paths(source: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in source.items():
        out.append(prefix + k)
        if isinstance(v, Mapping):
            out.extend(_paths(v, prefix + k + "."))
    return out


def _tag(options: Mapping[str, Any], name: str) -> str | None:
    tags = options.get(name)
    if tags is None:
        return None
    if not isinstance(tags, list | tuple) or not tags or not all(isinstance(t, str) for t in tags):
        raise QueryParsingError(f"[highlight] [{name}] must be an array of strings")
    return str(tags[0])


def _positive(options: Mapping[str, Any], name: str, default: int) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise QueryParsingError(f"[highlight] [{name}] must be a non-negative integer, found [{value}]")
    return min(value, 2**31 - 1)


def parse_highlight(value: Any) -> Highlight:
    if not isinstance(value, Mapping):
        raise QueryParsingError(f"Unknown key for a {token_name(value)} in [highlight].")
    for k in value:
        if k != "fields" and k not in HIGHLIGHT_OPTIONS:
            raise QueryParsingError(f"[highlight] unknown field [{k}]")
    kind = value.get("type", "unified")
    if kind not in ("unified", "plain"):
        raise QueryParsingError(f"[highlight] type [{kind}] is not supported here; use [unified] or [plain]")
    raw = value.get("fields")
    if isinstance(raw, Mapping):
        names = tuple(raw)
    elif isinstance(raw, list | tuple) and all(isinstance(f, Mapping) and len(f) == 1 for f in raw):
        names = tuple(next(iter(f)) for f in raw)
    else:
        raise QueryParsingError("[highlight] requires a [fields] object")
    return Highlight(
        fields=names,
        pre_tag=_tag(value, "pre_tags") or "<em>",
        post_tag=_tag(value, "post_tags") or "</em>",
        fragment_size=_positive(value, "fragment_size", 100),
        number_of_fragments=_positive(value, "number_of_fragments", 5),
    )


#: A predicate on a field's token: does the query look for it?
Wanted = Callable[[str], bool]


def highlight_hit(
    spec: Highlight, source: Mapping[str, Any], wanted: Mapping[str, Wanted], whole_value: Mapping[str, bool]
) -> dict[str, list[str]] | None:
    """The ``highlight`` of one hit: fields in source order, only those with a match."""
    out: dict[str, list[str]] = {}
    for path in spec.fields_of(source):
        match = wanted.get(path)
        if match is None:
            continue
        fragments: list[str] = []
        for value in field_values(source, path):
            text = as_keyword(value)
            if whole_value.get(path, False):
                if match(text):
                    fragments.append(spec.pre_tag + text + spec.post_tag)
                continue
            fragments.extend(_fragments(spec, text, match))
        if fragments:
            limit = spec.number_of_fragments or len(fragments)
            out[path] = fragments[:limit]
    return out or None


def _fragments(spec: Highlight, text: str, match: Wanted) -> list[str]:
    spans = [(b, e) for token, b, e in analyze_with_offsets(text) if match(token)]
    if not spans:
        return []
    if spec.number_of_fragments == 0 or len(text) <= spec.fragment_size:
        return [_tagged(spec, text, 0, len(text), spans)]
    out: list[str] = []
    for sentence in SENTENCE.finditer(text):
        begin, end = sentence.span()
        inside = [(b, e) for b, e in spans if begin <= b < end]
        if inside and end > begin:
            out.append(_tagged(spec, text, begin, end, inside).strip())
    return out


def _tagged(spec: Highlight, text: str, begin: int, end: int, spans: list[tuple[int, int]]) -> str:
    parts: list[str] = []
    at = begin
    for b, e in spans:
        parts.append(text[at:b])
        parts.append(spec.pre_tag + text[b:e] + spec.post_tag)
        at = e
    parts.append(text[at:end])
    return "".join(parts)
