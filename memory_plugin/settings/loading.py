"""Loading: defaults, then a TOML file, then ``MEMORY_PLUGIN_*`` variables, then the caller's overrides.

Everything the server needs is in one frozen object handed to ``create_app``; nothing reads the
environment after that.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import re2

from memory_plugin.settings.tree import (
    ENV_PREFIX,
    FLAT,
    KEYS,
    LUCENE_VERSIONS,
    REGIONS,
    SECTIONS,
    EmbeddedRegion,
    Key,
    OpenSearchRegion,
    RegionSettings,
    RetentionSection,
    Settings,
    sections,
)

log = logging.getLogger("memory_plugin.settings")


def _coerce(name: str, kind: Any, value: Any) -> Any:
    args = typing.get_args(kind)
    if isinstance(kind, types.UnionType):  # ``X | None``
        kind = next(arg for arg in args if arg is not type(None))
    elif typing.get_origin(kind) is tuple:
        kind = tuple
    elif typing.get_origin(kind) is Literal:
        kind = str
    if kind is tuple:  # a TOML list, or in the environment a JSON list (a regex may hold commas)
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.lstrip().startswith("[") else [value]
            except json.JSONDecodeError as error:
                raise ValueError(f"setting {name!r}: expected a JSON list of strings, got {value!r}") from error
        if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"setting {name!r}: expected a list of strings, got {value!r}")
        return tuple(value)
    if kind is bool and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
            raise ValueError(f"setting {name!r}: expected a boolean, got {value!r}")
        return lowered in {"1", "true", "yes", "on"}
    if kind is bool and value not in (True, False):  # bool([]) would be False
        raise ValueError(f"setting {name!r}: expected a boolean, got {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"setting {name!r}: expected {kind.__name__}, got {value!r}") from error


def _region(name: str, raw: Mapping[str, Any]) -> RegionSettings:
    options = dict(raw)
    kind = options.pop("store", "embedded")
    if kind == "embedded":
        path = options.pop("path", None)
        metadata_columns = options.pop("metadata_columns", 64)
        filter_cache_mb = options.pop("filter_cache_mb", 256)
        if options:
            raise ValueError(f"region {name}: unknown embedded settings {sorted(options)}")
        if isinstance(metadata_columns, bool) or not isinstance(metadata_columns, int) or metadata_columns < 1:
            raise ValueError(f"region {name}: metadata_columns must be a positive integer, not {metadata_columns!r}")
        if (
            isinstance(filter_cache_mb, bool)
            or not isinstance(filter_cache_mb, int)
            or not 0 <= filter_cache_mb <= 1 << 20
        ):
            raise ValueError(
                f"region {name}: filter_cache_mb must be an integer from 0 to 1048576, not {filter_cache_mb!r}"
            )
        return EmbeddedRegion(
            path=Path(path) if path else None, metadata_columns=metadata_columns, filter_cache_mb=filter_cache_mb
        )
    if kind == "opensearch":
        known = {f.name for f in dataclasses.fields(OpenSearchRegion)} - {"store"}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"region {name}: unknown opensearch settings {sorted(unknown)}")
        if "hosts" in options:
            hosts = options["hosts"]
            options["hosts"] = tuple([hosts] if isinstance(hosts, str) else hosts)
        return OpenSearchRegion(**options)
    raise ValueError(f"region {name}: store must be 'embedded' or 'opensearch', not {kind!r}")


class _Values:
    """The values found so far, by key, and the flat names already warned about."""

    def __init__(self) -> None:
        self.found: dict[str, Any] = {}
        self.warned: set[str] = set()

    def put(self, key: Key, label: str, value: Any) -> None:
        self.found[key.name] = _coerce(label, key.kind, value)

    def put_flat(self, key: Key, label: str, value: Any, *, instead: str) -> None:
        if label not in self.warned:
            self.warned.add(label)
            log.warning("setting %s is deprecated: use %s (same value)", label, instead)
        self.put(key, label, value)

    def override(self, name: str, value: Any) -> None:
        if value is None:
            return
        if name in SECTIONS and isinstance(value, Mapping):
            for inner, item in value.items():
                self.override(f"{name}.{inner}", item)
        elif name in KEYS:
            self.put(KEYS[name], name, value)
        else:
            raise ValueError(f"unknown setting {name!r}")

    def table(self, origin: object, prefix: str, table: Mapping[str, Any], flat: dict[str, Any]) -> None:
        """A TOML table: keys of its section, sub-tables, and at the top flat names (kept for later)."""
        for name, value in table.items():
            dotted = f"{prefix}{name}"
            if dotted in SECTIONS and isinstance(value, Mapping):
                self.table(origin, dotted + ".", value, flat)
            elif dotted in KEYS:
                self.put(KEYS[dotted], dotted, value)
            elif not prefix and name in FLAT:
                flat[name] = value
            else:
                raise ValueError(f"{origin}: unknown setting {dotted!r}")


def _tree(cls: type, found: Mapping[str, Any], prefix: str = "") -> Any:
    subsections = dict(sections(cls))
    values = {
        item.name: _tree(subsections[item.name], found, f"{prefix}{item.name}.")
        for item in dataclasses.fields(cls)
        if item.name in subsections
    }
    values.update(
        (item.name, found[prefix + item.name]) for item in dataclasses.fields(cls) if prefix + item.name in found
    )
    return cls(**values)


def load_settings(
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Defaults, then ``config_file`` (TOML), then the environment, then ``overrides``.

    ``overrides`` are fields of the root or sections as mappings (``http={"port": 0}``); None is no override.
    Within one source a key's own name wins over its flat one.
    """
    environ = os.environ if environ is None else environ
    values = _Values()
    regions: dict[str, RegionSettings] | None = None
    # An empty variable is unset, as for every other setting.
    config_file = config_file or (Path(environ[ENV_PREFIX + "CONFIG"]) if environ.get(ENV_PREFIX + "CONFIG") else None)
    if config_file is not None:
        with open(config_file, "rb") as handle:
            document = tomllib.load(handle)
        raw_regions = document.pop("regions", None)
        flat: dict[str, Any] = {}
        values.table(config_file, "", {name: value for name, value in document.items()}, flat)
        for name, value in flat.items():
            key = FLAT[name]
            if key.name not in values.found:
                values.put_flat(key, name, value, instead=f"{key.path[-1]} in [{'.'.join(key.path[:-1])}]")
        if raw_regions is not None:
            regions = {name: _region(name, raw) for name, raw in raw_regions.items()}
    for name, key in FLAT.items():
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw and ENV_PREFIX + name.upper() != key.env:
            values.put_flat(key, ENV_PREFIX + name.upper(), raw, instead=key.env)
    for key in KEYS.values():
        raw = environ.get(key.env)
        if raw is not None and raw != "":
            values.put(key, key.env, raw)
    for name, value in overrides.items():
        if name == "regions" and value is not None:
            regions = value
        elif name in FLAT and name not in KEYS and name not in SECTIONS and value is not None:
            values.put_flat(FLAT[name], name, value, instead=FLAT[name].name)
        else:
            values.override(name, value)
    if regions is not None:
        values.found["regions"] = regions
    settings: Settings = _tree(Settings, values.found)
    _check(settings)
    return settings


#: ml-commons' bounds of its retention settings (min, max), with -1 as unset.
_RETENTION_BOUNDS = {
    "default_session_retention_days": 3650,
    "default_session_max_count": 1_000_000,
    "default_long_term_max_count": 1_000_000,
    "default_history_max_count": 10_000_000,
    "working_memory_ttl_days": 365,
}


def _check_retention(retention: RetentionSection) -> None:
    if not retention.interval > 0:
        raise ValueError("setting 'agentic.retention.interval' must be a positive number of seconds")
    for name, most in _RETENTION_BOUNDS.items():
        if not -1 <= getattr(retention, name) <= most:
            raise ValueError(f"setting 'agentic.retention.{name}' must be between -1 and {most} (0 or less: unset)")


def _check(settings: Settings) -> None:
    """What a type cannot say: ranges, patterns, and settings that go together."""
    for pattern in settings.ml.trusted_endpoints_regex:
        try:
            re2.compile(pattern)
        except re2.error as error:
            raise ValueError(
                f"setting 'ml.trusted_endpoints_regex': {pattern!r} is not a regex RE2 runs: {error}"
            ) from error
    for name in ("http.body_read_timeout", "http.idle_timeout", "bridge.retry_max_seconds", "ml.connector_timeout"):
        section, key = name.split(".")
        if not getattr(getattr(settings, section), key) > 0:
            raise ValueError(f"setting {name!r} must be a positive number of seconds")
    if settings.node.reported_version not in LUCENE_VERSIONS:
        raise ValueError(f"setting 'node.reported_version' must be one of {sorted(LUCENE_VERSIONS)}")
    if settings.ml.org_calls_per_minute < 0 or settings.ml.org_concurrent_calls < 0:
        raise ValueError(
            "settings 'ml.org_calls_per_minute' and 'ml.org_concurrent_calls' must be 0 (no limit) or more"
        )
    _check_retention(settings.agentic.retention)
    if settings.http.page_cache_mb < 0:
        raise ValueError("setting 'http.page_cache_mb' must be 0 (keep no pages) or more megabytes")
    if not 1 <= settings.bridge.batch_size <= 100:
        raise ValueError("setting 'bridge.batch_size' must be between 1 and 100 (records per ingestion)")
    auth = settings.auth
    if auth.metrics_token is not None and not auth.metrics_token.strip():
        raise ValueError("setting 'auth.metrics_token' must not be empty; leave it unset to disable metrics")
    unknown = [name for name in settings.regions if name not in REGIONS]
    if unknown:
        raise ValueError(f"unknown regions {unknown}; regions are {list(REGIONS)}")
    if settings.home_region not in settings.regions:
        raise ValueError(f"home_region {settings.home_region!r} is not among the configured regions")
    if (auth.sigv4_keys_file is None) != (auth.sigv4_region is None):
        raise ValueError("settings 'auth.sigv4_keys_file' and 'auth.sigv4_region' go together: set both, or neither")
    if auth.keys_backend not in ("file", "opensearch"):
        raise ValueError(f"setting 'auth.keys_backend' must be 'file' or 'opensearch', not {auth.keys_backend!r}")
    if auth.keys_backend == "opensearch" and not isinstance(settings.regions[settings.home_region], OpenSearchRegion):
        raise ValueError(
            f"setting 'auth.keys_backend' is 'opensearch', which keeps the keys in the home region's OpenSearch "
            f"cluster, but the home region {settings.home_region} is embedded; put it on OpenSearch, or use "
            "keys_backend = 'file' in [auth]"
        )
