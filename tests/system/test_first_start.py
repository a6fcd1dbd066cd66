"""A first start, as ``make run`` does it: port 9200, a development key printed once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from memory_plugin.settings import load_settings
from tests.support.live import STARTUP_SECONDS

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_opensearch_like():
    settings = load_settings(environ={})
    assert (settings.http.host, settings.http.port) == ("127.0.0.1", 9200)
    assert list(settings.regions) == ["USA", "DEU", "AUS", "UAE"]


def test_first_start_serves_on_9200_and_prints_a_working_development_key(tmp_path):
    data_dir = tmp_path / "data"
    log = tmp_path / "serve.log"
    # The defaults, as on a fresh machine: no host, port or config from the caller's environment.
    environment = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "MEMORY_PLUGIN_HTTP_HOST",
            "MEMORY_PLUGIN_HTTP_PORT",
            "MEMORY_PLUGIN_HOST",
            "MEMORY_PLUGIN_PORT",
            "MEMORY_PLUGIN_CONFIG",
        )
    }
    environment["MEMORY_PLUGIN_BRIDGE_ENABLED"] = "false"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "memory_plugin", "serve", "--data-dir", str(data_dir)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    try:
        token = None
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline and token is None:
            assert server.poll() is None, log.read_text()
            match = re.search(r"^\s+(key_[0-9a-f]+\.\S+)$", log.read_text(), re.MULTILINE)
            token = match.group(1) if match else None
            time.sleep(0.2)
        assert token, log.read_text()
        while time.monotonic() < deadline:
            try:
                request = urllib.request.Request(
                    "http://127.0.0.1:9200/_plugins/_ml/memory/conversation",
                    headers={"Authorization": f"Bearer {token}"},
                )
                with urllib.request.urlopen(request, timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise AssertionError("the server never answered on 9200:\n" + log.read_text())
        assert token.split(".", 1)[1] not in (data_dir / "keys.json").read_text(), "only a hash is stored"
        with urllib.request.urlopen("http://127.0.0.1:9200/_health", timeout=5) as response:
            model = json.load(response)["details"]["model"]
        assert (model["precision"], model["int8_gemm"]) == ("int8", "u8u8"), model
        started = [json.loads(line) for line in log.read_text().splitlines() if "embedding model loaded" in line]
        assert [line["model"] for line in started] == [model], "the start-up log says what /_health says"
    finally:
        server.terminate()
        server.wait(30)
