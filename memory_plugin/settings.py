"""Settings: defaults, then a TOML file, then ``MEMORY_PLUGIN_*`` variables.

Everything the server needs is in one frozen object handed to
``create_app``; nothing reads the environment after that.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import re2

REGIONS = ("USA", "DEU", "AUS", "UAE")
ENV_PREFIX = "MEMORY_PLUGIN_"


@dataclass(frozen=True)
class EmbeddedRegion:
    """A region served from SQLite + faiss files under the data folder."""

    store: Literal["embedded"] = "embedded"
    #: Defaults to ``<data_dir>/regions/<name>``.
    path: Path | None = None
    #: The most metadata keys kept in memory as filter columns per record type, least recently
    #: used dropped (each costs up to ~12 bytes per chunk that has the key); a filter naming
    #: more keys than this goes to SQL.
    metadata_columns: int = 64
    #: Megabytes per record type for contiguous copies of the rows of filters searched again (a 1% filter
    #: at a million chunks scans 2x faster from one), never more than a quarter of its vectors; 0 keeps none.
    filter_cache_mb: int = 256


@dataclass(frozen=True)
class OpenSearchRegion:
    """A region served by a real OpenSearch cluster."""

    hosts: tuple[str, ...] = ("http://127.0.0.1:9201",)
    store: Literal["opensearch"] = "opensearch"
    username: str | None = None
    password: str | None = None
    verify_certs: bool = True
    ca_certs: str | None = None
    index_prefix: str = "memory-plugin"
    #: Seconds for one request; the search deadline caps it further.
    timeout: float = 10.0
    knn_engine: str = "lucene"


RegionSettings = EmbeddedRegion | OpenSearchRegion


def _default_regions() -> dict[str, RegionSettings]:
    return {name: EmbeddedRegion() for name in REGIONS}


#: The versions ``GET /`` may report, with the Lucene version each OpenSearch release ships (its pom).
LUCENE_VERSIONS = {"2.19.1": "9.12.1", "3.3.0": "10.3.1", "3.9.0": "10.5.1"}

#: ml-commons 2.19's default trusted connector endpoints.
TRUSTED_ENDPOINTS = (
    r"^https://runtime\.sagemaker\..*[a-z0-9-]\.amazonaws\.com/.*$",
    r"^https://api\.sagemaker\..*[a-z0-9-]\.amazonaws\.com/.*$",
    r"^https://api\.openai\.com/.*$",
    r"^https://api\.cohere\.ai/.*$",
    r"^https://api\.deepseek\.com/.*$",
    r"^https://bedrock-runtime\..*[a-z0-9-]\.amazonaws\.com/.*$",
    r"^https://bedrock-agent-runtime\..*[a-z0-9-]\.amazonaws\.com/.*$",
    r"^https://bedrock\..*[a-z0-9-]\.amazonaws\.com/.*$",
    r"^https://textract\..*[a-z0-9-]\.amazonaws\.com$",
    r"^https://comprehend\..*[a-z0-9-]\.amazonaws\.com$",
)


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    #: OpenSearch's port, so that clients need no change.
    port: int = 9200
    data_dir: Path = Path("data")
    #: Defaults to ``<data_dir>/keys.json``.
    keys_file: Path | None = None
    #: Where API keys live: ``file`` (``keys_file``: one host) or ``opensearch`` (an index in the home
    #: region's cluster, which every process on every host reads; needs the home region on OpenSearch).
    keys_backend: str = "file"
    #: AWS SigV4 access keys (ml-commons' remote agentic memory signs with them): a 0600 JSON file mapping
    #: each access key id to its secret and principal (``memory_plugin.sigv4``); unset, SigV4 is refused.
    sigv4_keys_file: Path | None = None
    #: The region SigV4 requests must be signed for (the ``region`` of ml-commons' memory configuration).
    sigv4_region: str | None = None
    #: Model folder; defaults to the default model built by ``make install``.
    model_dir: Path | None = None
    embed_threads: int | None = None
    #: A model file named in the model folder's config (``fp32`` or ``int8`` for the default).
    embed_precision: str | None = None
    embed_batch_size: int = 32
    embed_max_wait_ms: float = 5.0
    query_cache_size: int = 1024
    #: Memory for rendered pages of messages, kept while their conversation is unchanged; 0 keeps none.
    page_cache_mb: int = 64
    home_region: str = "USA"
    regions: Mapping[str, RegionSettings] = field(default_factory=_default_regions)
    #: Seconds a region may take to answer a search before it counts as failed.
    search_deadline: float = 2.0
    #: Largest request body accepted, in bytes.
    max_body_bytes: int = 8 * 1024 * 1024
    #: Seconds a client may take to send a request body; then 408, and the connection closes.
    body_read_timeout: float = 60.0
    #: Seconds an idle connection (between requests, or before the first one) is kept open.
    idle_timeout: float = 75.0
    #: The operator's credential for ``GET /_metrics`` (a Bearer token); unset, metrics are disabled.
    metrics_token: str | None = None
    #: Write interactions from the memory API into the history index too.
    bridge: bool = True
    #: Outbox entries the bridge's background indexer takes at a time (at most 100 records per ingestion).
    bridge_batch_size: int = 64
    #: Longest wait, in seconds, between retries of an outbox entry that keeps failing (the backoff's cap).
    bridge_retry_max_seconds: float = 60.0
    #: ``info`` logs one JSON line per request; ``warning`` only problems.
    log_level: str = "info"
    #: What ``GET /`` reports, as an OpenSearch node would.
    cluster_name: str = "memory-plugin"
    node_name: str = "memory-plugin-0"
    #: The OpenSearch version ``GET /`` reports, for clients that branch on it: 3.9.0, the newest whose
    #: memory APIs are all served here (3.8's retention and pinning, 3.9's custom container ids and
    #: retention runs); ``3.3.0`` (agentic memory's first) or ``2.19.1`` for clients that expect those.
    reported_version: str = "3.9.0"
    #: Agentic memory (``/_plugins/_ml/memory_containers``); false answers 403 as ml-commons does.
    agentic_memory_enabled: bool = True
    #: Memory retention (ml-commons' ``memory.retention_enabled``): accept ``retention_policy`` and ``pinned``,
    #: run the background sweep and the ``_retention`` endpoints (docs/agentic-retention.md).
    agentic_retention_enabled: bool = False
    #: Seconds between background retention sweeps (ml-commons' ``memory.retention_job_interval_hours``, 24h).
    agentic_retention_interval: float = 86400.0
    #: Cluster-level default policy (ml-commons' ``memory.default_*``): -1 is unset; a positive value applies to
    #: containers with no ``retention_policy`` of their own (and not ``null``).
    agentic_retention_default_session_retention_days: int = -1
    agentic_retention_default_session_max_count: int = -1
    agentic_retention_default_long_term_max_count: int = -1
    agentic_retention_default_history_max_count: int = -1
    #: Days working memory of a session-less container is kept (``memory.working_memory_ttl_days``); -1: forever.
    agentic_working_memory_ttl_days: int = -1
    #: OpenAI-compatible chat completions URL for ``infer: true``; unset, inferring adds answer 400.
    agentic_llm_url: str | None = None
    agentic_llm_api_key: str | None = None
    agentic_llm_model: str = "gpt-4o-mini"
    #: Seconds one LLM call may take.
    agentic_llm_timeout: float = 30.0
    #: Deleting a working memory or session also deletes the long-term memories inferred only from it and
    #: the history quoting it (``agentic/forgetting.py``); false: ml-commons' delete of the one doc.
    agentic_forgetting: bool = True
    #: Where connectors may send requests: each action's URL must fully match one of these
    #: (ml-commons' ``plugins.ml_commons.trusted_connector_endpoints_regex``, same default).
    ml_trusted_endpoints_regex: tuple[str, ...] = TRUSTED_ENDPOINTS
    #: Let connectors reach loopback, private and link-local addresses (ml-commons'
    #: ``plugins.ml_commons.connector.private_ip_enabled``); off, such a call is refused (SSRF).
    ml_allow_private_addresses: bool = False
    #: Seconds one connector call may take, from connecting to the last byte of the answer.
    ml_connector_timeout: float = 30.0
    #: Per organisation and server process: remote model calls (predict, agentic infer) a minute, and at
    #: once; past either, a call is a 429.  0 is no limit.
    ml_org_calls_per_minute: int = 600
    ml_org_concurrent_calls: int = 16

    @property
    def resolved_keys_file(self) -> Path:
        return self.keys_file or self.data_dir / "keys.json"

    def region_path(self, name: str) -> Path:
        region = self.regions[name]
        assert isinstance(region, EmbeddedRegion)
        return region.path or self.data_dir / "regions" / name

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)


_SCALARS: dict[str, type] = {
    "host": str,
    "port": int,
    "data_dir": Path,
    "keys_file": Path,
    "keys_backend": str,
    "sigv4_keys_file": Path,
    "sigv4_region": str,
    "model_dir": Path,
    "embed_threads": int,
    "embed_precision": str,
    "embed_batch_size": int,
    "embed_max_wait_ms": float,
    "query_cache_size": int,
    "page_cache_mb": int,
    "home_region": str,
    "search_deadline": float,
    "max_body_bytes": int,
    "body_read_timeout": float,
    "idle_timeout": float,
    "metrics_token": str,
    "bridge": bool,
    "bridge_batch_size": int,
    "bridge_retry_max_seconds": float,
    "log_level": str,
    "cluster_name": str,
    "node_name": str,
    "reported_version": str,
    "agentic_memory_enabled": bool,
    "agentic_retention_enabled": bool,
    "agentic_retention_interval": float,
    "agentic_retention_default_session_retention_days": int,
    "agentic_retention_default_session_max_count": int,
    "agentic_retention_default_long_term_max_count": int,
    "agentic_retention_default_history_max_count": int,
    "agentic_working_memory_ttl_days": int,
    "agentic_llm_url": str,
    "agentic_llm_api_key": str,
    "agentic_llm_model": str,
    "agentic_llm_timeout": float,
    "agentic_forgetting": bool,
    "ml_trusted_endpoints_regex": tuple,
    "ml_allow_private_addresses": bool,
    "ml_connector_timeout": float,
    "ml_org_calls_per_minute": int,
    "ml_org_concurrent_calls": int,
}


def _coerce(name: str, kind: type, value: Any) -> Any:
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


#: ml-commons' bounds of its retention settings (min, max), with -1 as unset.
_RETENTION_BOUNDS = {
    "agentic_retention_default_session_retention_days": 3650,
    "agentic_retention_default_session_max_count": 1_000_000,
    "agentic_retention_default_long_term_max_count": 1_000_000,
    "agentic_retention_default_history_max_count": 10_000_000,
    "agentic_working_memory_ttl_days": 365,
}


def _check_retention(settings: Settings) -> None:
    if not settings.agentic_retention_interval > 0:
        raise ValueError("setting 'agentic_retention_interval' must be a positive number of seconds")
    for name, most in _RETENTION_BOUNDS.items():
        value = getattr(settings, name)
        if not -1 <= value <= most:
            raise ValueError(f"setting {name!r} must be between -1 and {most} (0 or less: unset)")


def load_settings(
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Defaults, then ``config_file`` (TOML), then the environment, then ``overrides``."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    # An empty variable is unset, as for every other setting.
    config_file = config_file or (Path(environ[ENV_PREFIX + "CONFIG"]) if environ.get(ENV_PREFIX + "CONFIG") else None)
    if config_file is not None:
        with open(config_file, "rb") as handle:
            document = tomllib.load(handle)
        regions = document.pop("regions", None)
        for name, value in document.items():
            if name not in _SCALARS:
                raise ValueError(f"{config_file}: unknown setting {name!r}")
            values[name] = _coerce(name, _SCALARS[name], value)
        if regions is not None:
            values["regions"] = {name: _region(name, raw) for name, raw in regions.items()}
    for name, kind in _SCALARS.items():
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is not None and raw != "":
            values[name] = _coerce(name, kind, raw)
    for name, value in overrides.items():
        if value is not None:
            values[name] = _coerce(name, _SCALARS[name], value) if name in _SCALARS else value
    settings = Settings(**values)
    for pattern in settings.ml_trusted_endpoints_regex:
        try:
            re2.compile(pattern)
        except re2.error as error:
            raise ValueError(
                f"setting 'ml_trusted_endpoints_regex': {pattern!r} is not a regex RE2 runs: {error}"
            ) from error
    for name in ("body_read_timeout", "idle_timeout", "bridge_retry_max_seconds", "ml_connector_timeout"):
        if not getattr(settings, name) > 0:
            raise ValueError(f"setting {name!r} must be a positive number of seconds")
    if settings.reported_version not in LUCENE_VERSIONS:
        raise ValueError(f"setting 'reported_version' must be one of {sorted(LUCENE_VERSIONS)}")
    if settings.ml_org_calls_per_minute < 0 or settings.ml_org_concurrent_calls < 0:
        raise ValueError(
            "settings 'ml_org_calls_per_minute' and 'ml_org_concurrent_calls' must be 0 (no limit) or more"
        )
    _check_retention(settings)
    if settings.page_cache_mb < 0:
        raise ValueError("setting 'page_cache_mb' must be 0 (keep no pages) or more megabytes")
    if not 1 <= settings.bridge_batch_size <= 100:
        raise ValueError("setting 'bridge_batch_size' must be between 1 and 100 (records per ingestion)")
    if settings.metrics_token is not None and not settings.metrics_token.strip():
        raise ValueError("setting 'metrics_token' must not be empty; leave it unset to disable metrics")
    unknown = [name for name in settings.regions if name not in REGIONS]
    if unknown:
        raise ValueError(f"unknown regions {unknown}; regions are {list(REGIONS)}")
    if settings.home_region not in settings.regions:
        raise ValueError(f"home_region {settings.home_region!r} is not among the configured regions")
    if (settings.sigv4_keys_file is None) != (settings.sigv4_region is None):
        raise ValueError("settings 'sigv4_keys_file' and 'sigv4_region' go together: set both, or neither")
    if settings.keys_backend not in ("file", "opensearch"):
        raise ValueError(f"setting 'keys_backend' must be 'file' or 'opensearch', not {settings.keys_backend!r}")
    if settings.keys_backend == "opensearch" and not isinstance(
        settings.regions[settings.home_region], OpenSearchRegion
    ):
        raise ValueError(
            f"setting 'keys_backend' is 'opensearch', which keeps the keys in the home region's OpenSearch cluster, "
            f"but the home region {settings.home_region} is embedded; put it on OpenSearch, or use keys_backend = 'file'"
        )
    return settings
