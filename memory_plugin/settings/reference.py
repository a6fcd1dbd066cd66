"""The configuration reference, rendered from the tree into docs/configuration.md."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

from memory_plugin.settings.tree import FLAT, KEYS, EmbeddedRegion, OpenSearchRegion

BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"


def _type_name(kind: Any) -> str:
    if isinstance(kind, types.UnionType):
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
    if typing.get_origin(kind) is tuple:
        return "list of strings"
    if typing.get_origin(kind) is Literal:
        return "string"
    return {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}[kind]


def _default(item: dataclasses.Field[Any]) -> str:
    if item.metadata.get("shown"):
        return str(item.metadata["shown"])
    if item.default is None:
        return "unset"
    value = item.default
    if isinstance(value, tuple):
        return f"`{json.dumps(list(value))}`"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _row(*cells: str) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def reference() -> str:
    """The Markdown tables of every setting, as docs/configuration.md carries them."""
    lines = [
        BEGIN,
        "<!-- Generated from memory_plugin/settings/tree.py by `python -m memory_plugin.settings --write "
        "docs/configuration.md`; do not edit by hand. -->",
        "",
        _row("Section", "Key", "Environment", "Type", "Default", "Description"),
        "|---|---|---|---|---|---|",
    ]
    for key in KEYS.values():
        section = f"`[{'.'.join(key.path[:-1])}]`" if len(key.path) > 1 else "(top level)"
        lines.append(
            _row(
                section,
                f"`{key.path[-1]}`",
                f"`{key.env}`",
                _type_name(key.kind),
                _default(key.field),
                str(key.field.metadata["doc"]),
            )
        )
    lines += [
        "",
        "Regions: a table per region, `[regions.USA]`, `[regions.DEU]`, `[regions.AUS]`, `[regions.UAE]` "
        "(no environment variables); every region is embedded unless configured.",
        "",
        _row("Store", "Key", "Type", "Default", "Description"),
        "|---|---|---|---|---|",
    ]
    for cls in (EmbeddedRegion, OpenSearchRegion):
        hints = typing.get_type_hints(cls)
        store = f"`{cls.store}`"
        for item in dataclasses.fields(cls):
            if item.name != "store":
                lines.append(
                    _row(store, f"`{item.name}`", _type_name(hints[item.name]), _default(item), item.metadata["doc"])
                )
    flat = ", ".join(f"`{name}` → `{key.name}`" for name, key in FLAT.items() if name != key.name.replace(".", "_"))
    lines += [
        "",
        "The flat names of earlier releases still load, with a warning in the log for each one used: as a "
        "top-level key in config.toml, a key's path joined by `_` (`agentic_llm_url` for `[agentic.llm] url`), "
        "and as `MEMORY_PLUGIN_` and that name in capitals where this is not the key's own variable "
        "(`MEMORY_PLUGIN_AGENTIC_LLM_URL` is). These flat names are not the path joined: " + flat + ".",
        END,
    ]
    return "\n".join(lines)


def write_reference(path: Path) -> bool:
    """Put the reference between the markers of ``path``; true if that changed the file."""
    text = path.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    updated = text[:start] + reference() + text[end:]
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    return updated != text
