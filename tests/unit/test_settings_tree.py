"""The settings tree: TOML tables and variable names come from it, flat names still load with a warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memory_plugin.settings import EmbeddedRegion, Settings, load_settings
from memory_plugin.settings.reference import BEGIN, END, reference
from memory_plugin.settings.tree import FLAT, KEYS

ROOT = Path(__file__).resolve().parents[2]

TREE = """
data_dir = "/srv/memory"
[http]
port = 9300
max_body_bytes = 1024
[embedder]
threads = 2
[bridge]
enabled = false
batch_size = 10
[agentic]
enabled = false
[agentic.retention]
enabled = true
interval = 60
working_memory_ttl_days = 7
[agentic.llm]
url = "http://llm.example/v1/chat/completions"
[ml]
org_calls_per_minute = 5
trusted_endpoints_regex = ["^https://a\\\\.example/.*$"]
[regions.USA]
metadata_columns = 8
"""

FLAT_TOML = """
data_dir = "/srv/memory"
port = 9300
max_body_bytes = 1024
embed_threads = 2
bridge = false
bridge_batch_size = 10
agentic_memory_enabled = false
agentic_retention_enabled = true
agentic_retention_interval = 60
agentic_working_memory_ttl_days = 7
agentic_llm_url = "http://llm.example/v1/chat/completions"
ml_org_calls_per_minute = 5
ml_trusted_endpoints_regex = ["^https://a\\\\.example/.*$"]
[regions.USA]
metadata_columns = 8
"""


def deprecations(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "deprecated" in r.getMessage()]


def load(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(text)
    return load_settings(config, environ=environ or {})


def test_a_tree_config_fills_each_section(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = load(tmp_path, TREE)
    assert settings.data_dir == Path("/srv/memory") and settings.http.port == 9300
    assert settings.http.max_body_bytes == 1024 and settings.http.host == "127.0.0.1"
    assert settings.embedder.threads == 2 and settings.embedder.batch_size == 32
    assert (settings.bridge.enabled, settings.bridge.batch_size) == (False, 10)
    assert settings.agentic.enabled is False and settings.agentic.forgetting is True
    retention = settings.agentic.retention
    assert (retention.enabled, retention.interval, retention.working_memory_ttl_days) == (True, 60.0, 7)
    assert settings.agentic.llm.url == "http://llm.example/v1/chat/completions"
    assert settings.ml.org_calls_per_minute == 5
    assert settings.ml.trusted_endpoints_regex == (r"^https://a\.example/.*$",)
    assert settings.regions["USA"] == EmbeddedRegion(metadata_columns=8)
    assert deprecations(caplog) == []


def test_a_flat_config_loads_the_same_settings_with_one_warning_per_flat_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert load(tmp_path, FLAT_TOML) == load(tmp_path, TREE)
    warned = deprecations(caplog)
    assert len(warned) == 12  # every flat key but data_dir, which is a key of the root as it was
    assert any("'port'" not in line and "port is deprecated: use port in [http]" in line for line in warned)
    assert any("bridge is deprecated: use enabled in [bridge]" in line for line in warned)
    assert any(
        "agentic_working_memory_ttl_days is deprecated: use working_memory_ttl_days in [agentic.retention]" in line
        for line in warned
    )


def test_in_one_file_the_tree_name_wins_over_the_flat_one(tmp_path: Path) -> None:
    assert load(tmp_path, "port = 1\n[http]\nport = 2\n").http.port == 2


def test_variables_in_both_forms(caplog: pytest.LogCaptureFixture) -> None:
    tree = load_settings(environ={"MEMORY_PLUGIN_HTTP_PORT": "9301", "MEMORY_PLUGIN_EMBEDDER_THREADS": "3"})
    assert (tree.http.port, tree.embedder.threads) == (9301, 3)
    assert deprecations(caplog) == []
    flat = load_settings(environ={"MEMORY_PLUGIN_PORT": "9301", "MEMORY_PLUGIN_EMBED_THREADS": "3"})
    assert flat == tree
    assert sorted(deprecations(caplog)) == [
        "setting MEMORY_PLUGIN_EMBED_THREADS is deprecated: use MEMORY_PLUGIN_EMBEDDER_THREADS (same value)",
        "setting MEMORY_PLUGIN_PORT is deprecated: use MEMORY_PLUGIN_HTTP_PORT (same value)",
    ]
    both = load_settings(environ={"MEMORY_PLUGIN_PORT": "1", "MEMORY_PLUGIN_HTTP_PORT": "2"})
    assert both.http.port == 2
    # A variable the flat settings already spelled as the tree does is simply current.
    caplog.clear()
    same = load_settings(environ={"MEMORY_PLUGIN_AGENTIC_RETENTION_INTERVAL": "5", "MEMORY_PLUGIN_NODE_NAME": "n"})
    assert (same.agentic.retention.interval, same.node.name) == (5.0, "n") and deprecations(caplog) == []


def test_the_variables_override_the_file(tmp_path: Path) -> None:
    settings = load(tmp_path, TREE, {"MEMORY_PLUGIN_BRIDGE_ENABLED": "yes", "MEMORY_PLUGIN_BRIDGE": "no"})
    assert settings.bridge.enabled is True


@pytest.mark.parametrize(
    "text,environ,named",
    [
        ('[http]\nport = "nine"\n', {}, "setting 'http.port': expected int, got 'nine'"),
        ('port = "nine"\n', {}, "setting 'port': expected int, got 'nine'"),
        ("", {"MEMORY_PLUGIN_HTTP_PORT": "nine"}, "setting 'MEMORY_PLUGIN_HTTP_PORT': expected int, got 'nine'"),
        ("", {"MEMORY_PLUGIN_PORT": "nine"}, "setting 'MEMORY_PLUGIN_PORT': expected int, got 'nine'"),
        ("[agentic]\nenabled = []\n", {}, "setting 'agentic.enabled'"),
        ("", {"MEMORY_PLUGIN_AGENTIC_FORGETTING": "maybe"}, "'MEMORY_PLUGIN_AGENTIC_FORGETTING': expected a boolean"),
        ("[ml]\ntrusted_endpoints_regex = 3\n", {}, "'ml.trusted_endpoints_regex': expected a list of strings"),
    ],
)
def test_a_bad_value_names_its_key(tmp_path: Path, text: str, environ: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError) as raised:
        load(tmp_path, text, environ)
    assert named in str(raised.value)


@pytest.mark.parametrize(
    "text,named",
    [
        ("[http]\nprot = 1\n", "'http.prot'"),
        ("[agentic.retention]\nsweep = 1\n", "'agentic.retention.sweep'"),
        ("colour = 1\n", "'colour'"),
        ("[colour]\nx = 1\n", "'colour'"),
    ],
)
def test_an_unknown_key_is_refused_by_its_path(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ValueError, match=f"unknown setting {named}"):
        load(tmp_path, text)


def test_checks_name_the_tree_key() -> None:
    with pytest.raises(ValueError, match="'bridge.batch_size' must be between 1 and 100"):
        load_settings(environ={"MEMORY_PLUGIN_BRIDGE_BATCH_SIZE": "0"})
    with pytest.raises(ValueError, match="'http.idle_timeout' must be a positive number"):
        load_settings(environ={"MEMORY_PLUGIN_HTTP_IDLE_TIMEOUT": "0"})


def test_overrides_and_replace_take_sections(caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings(environ={}, http={"port": "0", "host": None}, agentic={"retention": {"enabled": True}})
    assert (settings.http.port, settings.http.host, settings.agentic.retention.enabled) == (0, "127.0.0.1", True)
    assert deprecations(caplog) == []
    assert load_settings(environ={}, port=0) == settings.replace(agentic={"retention": {"enabled": False}})
    assert deprecations(caplog) == ["setting port is deprecated: use http.port (same value)"]
    changed = settings.replace(bridge={"batch_size": 5}, agentic={"llm": {"model": "m"}})
    assert (changed.bridge.batch_size, changed.bridge.enabled, changed.agentic.llm.model) == (5, True, "m")
    assert changed.agentic.retention.enabled is True and settings.bridge.batch_size == 64
    with pytest.raises(TypeError, match="'bridge' is a section"):
        settings.replace(bridge=True)
    with pytest.raises(TypeError, match="'metrics_token' is now 'auth.metrics_token'"):
        settings.replace(metrics_token="t")


def test_every_key_is_described_and_has_its_own_names() -> None:
    assert len(KEYS) == 45
    assert all(key.field.metadata["doc"] for key in KEYS.values())
    assert len({key.env for key in KEYS.values()}) == len(KEYS)
    assert len(FLAT) == 41 and all(key.name == flat or "." in key.name for flat, key in FLAT.items())
    own = {key.env for key in KEYS.values()}
    assert all("MEMORY_PLUGIN_" + flat.upper() not in own - {key.env} for flat, key in FLAT.items())


def test_docs_configuration_carries_the_current_reference() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert block == reference(), "run: python -m memory_plugin.settings --write docs/configuration.md"
    for key in KEYS.values():
        assert f"`{key.env}`" in block
