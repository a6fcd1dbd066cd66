"""The settings tree: a frozen dataclass per feature (``[http]``, ``[agentic.retention]``, ...) under the root
``Settings``.  A field's annotation is its type and its metadata its description; the TOML tables, the
``MEMORY_PLUGIN_<SECTION>_<KEY>`` names and docs/configuration.md all come from the tree.  The flat names
of earlier releases (``port = 9200``, ``MEMORY_PLUGIN_EMBED_THREADS``) still load, with a warning each.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

REGIONS = ("USA", "DEU", "AUS", "UAE")
ENV_PREFIX = "MEMORY_PLUGIN_"
T = TypeVar("T")


def setting(default: T, doc: str, *, flat: str | None = None, env: str | None = None, shown: str = "") -> T:
    """A field of the tree with its description.

    ``flat``: its name in the flat settings of earlier releases, when that is not its path joined by ``_``;
    ``env``: a variable name other than the derived one (one another program reads too);
    ``shown``: its default as the reference prints it, when the value itself would not do.
    """
    metadata = {"doc": doc, "flat": flat, "env": env, "shown": shown}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class EmbeddedRegion:
    """A region served from SQLite + faiss files under the data folder."""

    store: Literal["embedded"] = setting("embedded", "Where the region lives: `embedded` or `opensearch`.")
    path: Path | None = setting(None, "The region's folder.", shown="`<data_dir>/regions/<name>`")
    metadata_columns: int = setting(
        64,
        "The most metadata keys kept in memory as filter columns per record type, least recently used "
        "dropped (each costs up to ~12 bytes per chunk that has the key); a filter naming more keys than "
        "this goes to SQL.",
    )
    filter_cache_mb: int = setting(
        256,
        "Megabytes per record type for contiguous copies of the rows of filters searched again (a 1% filter "
        "at a million chunks scans 2x faster from one), never more than a quarter of its vectors; 0 keeps none.",
    )


@dataclass(frozen=True)
class OpenSearchRegion:
    """A region served by a real OpenSearch cluster."""

    hosts: tuple[str, ...] = setting(("http://127.0.0.1:9201",), "The cluster's URLs (a string or a list).")
    store: Literal["opensearch"] = setting("opensearch", "`opensearch`.")
    username: str | None = setting(None, "Basic authentication's user.")
    password: str | None = setting(None, "Basic authentication's password.")
    verify_certs: bool = setting(True, "Check the cluster's TLS certificate.")
    ca_certs: str | None = setting(None, "A CA bundle file for the cluster's certificate.")
    index_prefix: str = setting("memory-plugin", "The start of every index name the server creates.")
    timeout: float = setting(10.0, "Seconds for one request; the search deadline caps it further.")
    knn_engine: str = setting("lucene", "The k-NN engine of the vector fields.")


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
class HTTPSection:
    """The listening socket and the limits on a request."""

    host: str = setting("127.0.0.1", "The address to listen on.", flat="host")
    port: int = setting(9200, "The port to listen on: OpenSearch's, so that clients need no change.", flat="port")
    max_body_bytes: int = setting(8 * 1024 * 1024, "Largest request body accepted, in bytes.", flat="max_body_bytes")
    body_read_timeout: float = setting(
        60.0,
        "Seconds a client may take to send a request body; then 408, and the connection closes.",
        flat="body_read_timeout",
    )
    idle_timeout: float = setting(
        75.0,
        "Seconds an idle connection (between requests, or before the first one) is kept open.",
        flat="idle_timeout",
    )
    page_cache_mb: int = setting(
        64,
        "Memory for rendered pages of messages, kept while their conversation is unchanged; 0 keeps none.",
        flat="page_cache_mb",
    )


@dataclass(frozen=True)
class NodeSection:
    """What ``GET /`` reports, as an OpenSearch node would."""

    cluster_name: str = setting("memory-plugin", "The cluster name `GET /` reports.", flat="cluster_name")
    name: str = setting(
        "memory-plugin-0", "The node name `GET /` reports; it also names this process.", flat="node_name"
    )
    reported_version: str = setting(
        "3.9.0",
        "The OpenSearch version `GET /` reports, for clients that branch on it: 3.9.0, the newest whose memory "
        "APIs are all served here (3.8's retention and pinning, 3.9's custom container ids and retention runs); "
        "`3.3.0` (agentic memory's first) or `2.19.1` for clients that expect those.",
        flat="reported_version",
    )


@dataclass(frozen=True)
class AuthSection:
    """API keys, AWS SigV4 keys and the operator's metrics token."""

    keys_file: Path | None = setting(None, "The API keys file.", flat="keys_file", shown="`<data_dir>/keys.json`")
    keys_backend: str = setting(
        "file",
        "Where API keys live: `file` (`keys_file`: one host) or `opensearch` (an index in the home region's "
        "cluster, which every process on every host reads; needs the home region on OpenSearch).",
        flat="keys_backend",
    )
    sigv4_keys_file: Path | None = setting(
        None,
        "AWS SigV4 access keys (ml-commons' remote agentic memory signs with them): a 0600 JSON file mapping each "
        "access key id to its secret and principal; unset, SigV4 is refused.",
        flat="sigv4_keys_file",
    )
    sigv4_region: str | None = setting(
        None,
        "The region SigV4 requests must be signed for (the `region` of ml-commons' memory configuration).",
        flat="sigv4_region",
    )
    metrics_token: str | None = setting(
        None,
        "The operator's credential for `GET /_metrics` (a Bearer token); unset, metrics are disabled.",
        flat="metrics_token",
    )


@dataclass(frozen=True)
class EmbedderSection:
    """The embedding model and the batcher in front of it."""

    model_dir: Path | None = setting(
        None,
        "Model folder (the variable `make install` reads too).",
        flat="model_dir",
        env=ENV_PREFIX + "MODEL_DIR",
        shown="the default model `make install` builds",
    )
    threads: int | None = setting(
        None,
        "Threads one model call uses.",
        flat="embed_threads",
        shown="the runtime's (one per physical core); with `--workers N`, the cores over N",
    )
    precision: str | None = setting(
        None,
        "A model file named in the model folder's config (`fp32` or `int8` for the default).",
        flat="embed_precision",
        shown="the model's default",
    )
    batch_size: int = setting(32, "Texts embedded in one model call at most.", flat="embed_batch_size")
    max_wait_ms: float = setting(5.0, "Milliseconds a text waits for others to batch with.", flat="embed_max_wait_ms")
    query_cache_size: int = setting(
        1024, "Query embeddings kept, least recently used dropped.", flat="query_cache_size"
    )


@dataclass(frozen=True)
class BridgeSection:
    """The memory API's interactions written into the history index too."""

    enabled: bool = setting(True, "Write interactions from the memory API into the history index too.", flat="bridge")
    batch_size: int = setting(
        64, "Outbox entries the bridge's background indexer takes at a time (at most 100 records per ingestion)."
    )
    retry_max_seconds: float = setting(
        60.0, "Longest wait, in seconds, between retries of an outbox entry that keeps failing (the backoff's cap)."
    )


@dataclass(frozen=True)
class RetentionSection:
    """Memory retention, with ml-commons' ``memory.*`` settings (docs/agentic-retention.md)."""

    enabled: bool = setting(
        False,
        "Memory retention (ml-commons' `memory.retention_enabled`): accept `retention_policy` and `pinned`, "
        "run the background sweep and the `_retention` endpoints.",
    )
    interval: float = setting(
        86400.0, "Seconds between background retention sweeps (ml-commons' `memory.retention_job_interval_hours`)."
    )
    default_session_retention_days: int = setting(
        -1,
        "Cluster-level default policy (ml-commons' `memory.default_*`, this one up to 3650): -1 is unset; a "
        "positive value applies to containers with no `retention_policy` of their own (and not `null`).",
    )
    default_session_max_count: int = setting(-1, "As above, up to 1000000.")
    default_long_term_max_count: int = setting(-1, "As above, up to 1000000.")
    default_history_max_count: int = setting(-1, "As above, up to 10000000.")
    working_memory_ttl_days: int = setting(
        -1,
        "Days working memory of a session-less container is kept (`memory.working_memory_ttl_days`, up to 365); "
        "-1: forever.",
        flat="agentic_working_memory_ttl_days",
    )


@dataclass(frozen=True)
class LLMSection:
    """The chat model ``infer: true`` calls when a container names none of its own."""

    url: str | None = setting(
        None, "OpenAI-compatible chat completions URL for `infer: true`; unset, inferring adds answer 400."
    )
    api_key: str | None = setting(None, "Its Bearer token.")
    model: str = setting("gpt-4o-mini", "The model it is asked for.")
    timeout: float = setting(30.0, "Seconds one LLM call may take.")


@dataclass(frozen=True)
class AgenticSection:
    """Agentic memory (``/_plugins/_ml/memory_containers``)."""

    enabled: bool = setting(
        True, "Agentic memory; false answers 403 as ml-commons does.", flat="agentic_memory_enabled"
    )
    forgetting: bool = setting(
        True,
        "Deleting a working memory or session also deletes the long-term memories inferred only from it and the "
        "history quoting it (docs/agentic-forgetting.md); false: ml-commons' delete of the one doc.",
    )
    retention: RetentionSection = RetentionSection()
    llm: LLMSection = LLMSection()


@dataclass(frozen=True)
class MLSection:
    """ML Commons' models and connectors."""

    trusted_endpoints_regex: tuple[str, ...] = setting(
        TRUSTED_ENDPOINTS,
        "Where connectors may send requests: each action's URL must fully match one of these (ml-commons' "
        "`plugins.ml_commons.trusted_connector_endpoints_regex`); in the environment a JSON list.",
        shown="ml-commons 2.19's (OpenAI, Cohere, DeepSeek, Bedrock, SageMaker, Textract, Comprehend)",
    )
    allow_private_addresses: bool = setting(
        False,
        "Let connectors reach loopback, private and link-local addresses (ml-commons' "
        "`plugins.ml_commons.connector.private_ip_enabled`); off, such a call is refused (SSRF).",
    )
    connector_timeout: float = setting(
        30.0, "Seconds one connector call may take, from connecting to the last byte of the answer."
    )
    org_calls_per_minute: int = setting(
        600,
        "Per organisation and server process: remote model calls (predict, agentic infer) a minute; past it, a "
        "call is a 429.  0 is no limit.",
    )
    org_concurrent_calls: int = setting(16, "The same, for calls at once.")


@dataclass(frozen=True)
class Settings:
    """The root: where data lives, the regions, and a section per feature."""

    data_dir: Path = setting(Path("data"), "The folder of every embedded store and the keys file.")
    home_region: str = setting(
        "USA", "The region of the memory API, agentic memory, models and (with `opensearch`) the keys."
    )
    search_deadline: float = setting(2.0, "Seconds a region may take to answer a search before it counts as failed.")
    log_level: str = setting("info", "`info` logs one JSON line per request; `warning` only problems.")
    regions: Mapping[str, RegionSettings] = field(default_factory=_default_regions)
    http: HTTPSection = HTTPSection()
    node: NodeSection = NodeSection()
    auth: AuthSection = AuthSection()
    embedder: EmbedderSection = EmbedderSection()
    bridge: BridgeSection = BridgeSection()
    agentic: AgenticSection = AgenticSection()
    ml: MLSection = MLSection()

    @property
    def resolved_keys_file(self) -> Path:
        return self.auth.keys_file or self.data_dir / "keys.json"

    def region_path(self, name: str) -> Path:
        region = self.regions[name]
        assert isinstance(region, EmbeddedRegion)
        return region.path or self.data_dir / "regions" / name

    def replace(self, **changes: Any) -> Settings:
        """Fields of the root, or sections: a section object, or a mapping merged into the current one."""
        return _merged(self, changes)


def _merged(section: T, changes: Mapping[str, Any]) -> T:
    kind: type = type(section)
    inner = dict(sections(kind))
    merged: dict[str, Any] = {}
    for name, value in changes.items():
        if name in inner and isinstance(value, Mapping):
            value = _merged(getattr(section, name), value)
        elif name in inner and not isinstance(value, inner[name]):
            raise TypeError(f"{name!r} is a section: give a mapping of its keys, or a {inner[name].__name__}")
        elif isinstance(section, Settings) and name in FLAT:
            raise TypeError(f"{name!r} is now {FLAT[name].name!r}")
        merged[name] = value
    return dataclasses.replace(section, **merged)  # type: ignore[type-var]


@dataclass(frozen=True)
class Key:
    """One setting of the tree: where it sits, its type and its names."""

    path: tuple[str, ...]
    field: dataclasses.Field[Any]
    kind: Any

    @property
    def name(self) -> str:
        return ".".join(self.path)

    @property
    def env(self) -> str:
        return str(self.field.metadata.get("env") or ENV_PREFIX + "_".join(self.path).upper())

    @property
    def flat(self) -> str:
        """Its name in the flat settings of earlier releases."""
        return str(self.field.metadata.get("flat") or "_".join(self.path))


@functools.cache
def sections(cls: type) -> tuple[tuple[str, type], ...]:
    """``cls``'s sections by field name, once a class: resolving its annotations is most of loading settings."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (item.name, hints[item.name]) for item in dataclasses.fields(cls) if dataclasses.is_dataclass(hints[item.name])
    )


def keys(cls: type = Settings, prefix: tuple[str, ...] = ()) -> Iterator[Key]:
    """Every scalar setting of ``cls``, depth first, in declaration order (regions are not scalars)."""
    hints = typing.get_type_hints(cls)
    subsections = dict(sections(cls))
    for item in dataclasses.fields(cls):
        if item.name in subsections:
            yield from keys(subsections[item.name], (*prefix, item.name))
        elif "doc" in item.metadata and item.name != "regions":
            yield Key((*prefix, item.name), item, hints[item.name])


KEYS = {key.name: key for key in keys()}
BY_ENV = {key.env: key for key in KEYS.values()}
#: Flat names (TOML top-level keys, ``MEMORY_PLUGIN_<FLAT>``) of keys that now sit in a section.
FLAT = {key.flat: key for key in KEYS.values() if len(key.path) > 1}
SECTIONS = {".".join(path) for key in KEYS.values() for path in (key.path[:i] for i in range(1, len(key.path)))}
assert not set(BY_ENV) & {ENV_PREFIX + flat.upper() for flat, key in FLAT.items() if BY_ENV.get(key.env) is not key}
