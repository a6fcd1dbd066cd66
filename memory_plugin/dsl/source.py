"""``_source`` filtering: which fields of a hit's source are returned."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_plugin.dsl.values import QueryParsingError, token_name


@dataclass(frozen=True)
class SourceFilter:
    enabled: bool = True
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()

    def apply(self, src: Mapping[str, Any]) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        if not self.includes and not self.excludes:
            return dict(src)
        return filter_object(src, "", self.includes, self.excludes)


def filter_object(
    obj: Mapping[str, Any], prefix: str, includes: tuple[str, ...], excludes: tuple[str, ...]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        path = f"{prefix}{k}"
        if any(fnmatch.fnmatchcase(path, p) for p in excludes):
            continue
        included = not includes or any(fnmatch.fnmatchcase(path, p) for p in includes)
        if isinstance(v, Mapping):
            deeper = included or any(p.startswith(path + ".") or p.startswith("*") for p in includes)
            if deeper:
                sub = filter_object(v, path + ".", () if included else includes, excludes)
                if sub or included:
                    out[k] = sub
        elif isinstance(v, list | tuple) and any(isinstance(x, Mapping) for x in v):
            deeper = included or any(p.startswith(path + ".") or p.startswith("*") for p in includes)
            if deeper:
                deeper_includes = () if included else includes
                items = [
                    filter_object(x, path + ".", deeper_includes, excludes) if isinstance(x, Mapping) else x for x in v
                ]
                items = [x for x in items if included or x != {}]
                if items or included:
                    out[k] = items
        elif included:
            out[k] = v
    return out


def string_list(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise QueryParsingError(f"Unknown key for a {token_name(value)} in [{what}].")


def parse_source(value: Any) -> SourceFilter:
    if isinstance(value, bool):
        return SourceFilter(enabled=value)
    if isinstance(value, str | list | tuple):
        return SourceFilter(includes=string_list(value, "_source"))
    if isinstance(value, Mapping):
        includes: tuple[str, ...] = ()
        excludes: tuple[str, ...] = ()
        for k, v in value.items():
            if k in ("includes", "include"):
                includes = string_list(v, k)
            elif k in ("excludes", "exclude"):
                excludes = string_list(v, k)
            else:
                raise QueryParsingError(f"Unknown key for a {token_name(v)} in [{k}].")
        return SourceFilter(includes=includes, excludes=excludes)
    raise QueryParsingError(f"Unknown key for a {token_name(value)} in [_source].")
