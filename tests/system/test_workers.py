"""``memory-plugin serve --workers 2`` with every store, and the keys, on a real OpenSearch node: both
workers answer on one port, a worker killed with SIGKILL is replaced while requests keep succeeding, and
SIGTERM stops them all.  With the embedded default it is refused at once, naming what is embedded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from memory_plugin.cli import main
from tests.support.live import STARTUP_SECONDS, free_port

METRICS_TOKEN = "operator-secret"


def memory_plugin(*args: str) -> list[str]:
    return [sys.executable, "-m", "memory_plugin", *args]


def call(url: str, token: str | None = None, body: dict[str, Any] | None = None, timeout: float = 60) -> Any:
    """One request on a new connection (so that the kernel picks a worker afresh); the JSON answer."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        assert response.status == 200
        raw = response.read()
        return json.loads(raw) if response.headers.get_content_type() == "application/json" else raw.decode()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def config(opensearch_nodes, tmp_path: Path) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    prefix = f"w-{uuid.uuid4().hex[:10]}"
    path = tmp_path / "memory-plugin.toml"
    path.write_text(
        f'[auth]\nkeys_backend = "opensearch"\nmetrics_token = "{METRICS_TOKEN}"\n[node]\nname = "workers-test"\n'
        f'[regions.USA]\nstore = "opensearch"\nhosts = ["{opensearch_nodes[0].url}"]\nindex_prefix = "{prefix}-usa"\ntimeout = 30\n'
        f'[regions.DEU]\nstore = "opensearch"\nhosts = ["{opensearch_nodes[1].url}"]\nindex_prefix = "{prefix}-deu"\ntimeout = 30\n'
    )
    yield path
    for node in opensearch_nodes:
        client = OpenSearch(hosts=[node.url], max_retries=0)
        try:
            client.indices.delete(index=f"{prefix}-*", ignore_unavailable=True)
        finally:
            client.close()


@pytest.mark.opensearch
def test_two_workers_share_a_port_and_a_killed_one_is_replaced(config: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["keys", "create", "--config", str(config), "--org", "org-1", "--user", "alice"]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1].split()[-1]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "workers.log"
    command = memory_plugin("serve", "--workers", "2", "--config", str(config), "--port", str(port))
    command += ["--host", "127.0.0.1", "--data-dir", str(tmp_path / "data")]
    with open(log_path, "wb") as log:
        parent = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    seen: set[int] = set()

    def log_tail() -> str:
        return log_path.read_text(errors="replace")[-4000:]

    def pids_until(wanted: Any) -> set[int]:
        """Ask ``/_health`` on new connections until ``wanted(pids seen)``; the pids seen.  A worker started
        now loads its model first: on a loaded machine that takes minutes, so the bound is a time, not a count."""
        found: set[int] = set()
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            assert parent.poll() is None, log_tail()
            try:
                health = call(url + "/_health", timeout=5)
            except OSError:
                time.sleep(0.2)
                continue
            assert health["process"]["node_name"] == "workers-test" and health["process"]["hostname"]
            assert "outbox" in health["backlog"] and "agentic_pending_embeddings" in health["backlog"], health
            found.add(health["process"]["pid"])
            if wanted(found):
                return found
            time.sleep(0.05)
        raise AssertionError(f"/_health never showed what was wanted; saw {found}\n{log_tail()}")

    try:
        workers = pids_until(lambda pids: len(pids) == 2)
        seen |= workers
        assert parent.pid not in workers, "the parent serves nothing itself"
        created = [call(url + "/_plugins/_ml/memory", token, {"name": "before"})["memory_id"]]
        metrics = call(url + "/_metrics", METRICS_TOKEN)
        assert 'memory_plugin_process{hostname="' in metrics and 'node_name="workers-test"' in metrics
        assert "memory_plugin_agentic_pending_embeddings" in metrics

        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        # Requests keep succeeding meanwhile: the survivor answers, and connections that reach the
        # victim's socket wait in its queue until the worker started in its place accepts them.
        for n in range(10):
            created.append(call(url + "/_plugins/_ml/memory", token, {"name": f"during {n}"})["memory_id"])
        replaced = pids_until(lambda pids: bool(pids - workers))
        seen |= replaced
        assert victim not in replaced and not alive(victim)
        assert f"worker pid {victim} ended (signal 9); starting another in its place" in log_path.read_text()
        for memory_id in created:  # each read by whichever worker the connection reaches
            assert call(f"{url}/_plugins/_ml/memory/{memory_id}", token)["memory_id"] == memory_id
    finally:
        parent.send_signal(signal.SIGTERM)
        try:
            code = parent.wait(60)
        except subprocess.TimeoutExpired:
            parent.kill()
            raise
        finally:
            for pid in seen:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    assert code == 0, log_tail()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in seen), "SIGTERM stops every worker"


def test_more_than_one_worker_on_the_embedded_default_is_refused_at_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    command = memory_plugin("serve", "--workers", "2", "--port", str(free_port()), "--data-dir", str(data_dir))
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    message = refused.stderr.strip().splitlines()[-1]
    assert "--workers 2 needs every store on OpenSearch" in message and str(data_dir) in message, refused.stderr
    assert "embedding model loaded" not in refused.stderr and "Traceback" not in refused.stderr
    assert not data_dir.exists(), "nothing was started"


def test_workers_that_keep_failing_at_start_make_the_parent_give_up(tmp_path: Path) -> None:
    """Every store on a cluster nobody answers at: each worker fails while opening, and the parent exits 1
    after ``MAX_START_FAILURES`` of them instead of restarting them forever."""
    config = tmp_path / "memory-plugin.toml"
    config.write_text('[regions.USA]\nstore = "opensearch"\nhosts = ["http://127.0.0.1:1"]\ntimeout = 2\n')
    command = memory_plugin("serve", "--workers", "2", "--config", str(config), "--port", str(free_port()))
    failed = subprocess.run(
        command + ["--data-dir", str(tmp_path / "data")], capture_output=True, text=True, timeout=600
    )
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "workers keep ending before they serve (3 in a row" in failed.stderr, failed.stderr[-3000:]
