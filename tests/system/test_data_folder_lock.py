"""One process per embedded data folder (issue 24, item 1): a second ``serve`` on a folder in
use exits before it loads a model, naming the folder and the holder's pid, and the first keeps
serving; keys still work beside it; a killed holder's lock goes with it."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from tests.support.live import LiveServer, free_port, live_server_with_key


def memory_plugin(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memory_plugin", *args], capture_output=True, text=True, timeout=timeout
    )


def create_memory(server: LiveServer, token: str) -> int:
    request = urllib.request.Request(
        server.url + "/_plugins/_ml/memory",
        data=json.dumps({"name": "beside a refused second server"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def test_a_second_server_on_a_folder_in_use_exits_at_once_and_the_first_serves_on(tmp_path):
    data_dir = tmp_path / "data"
    first = live_server_with_key(data_dir)  # started
    try:
        assert first.process is not None
        second = memory_plugin("serve", "--port", str(free_port()), "--data-dir", str(data_dir))
        assert second.returncode != 0, second.stderr[-2000:]
        # refused before the seconds a model takes to load (what "at once" means, on any machine)
        assert "embedding model loaded" not in second.stderr, second.stderr[-2000:]
        message = second.stderr.strip().splitlines()[-1]
        assert str(data_dir) in message and f"pid {first.process.pid}" in message, second.stderr[-2000:]
        assert "Traceback" not in second.stderr, "a clear message, not a stack"

        assert create_memory(first, first.token) == 200, "the first server is untouched"
        created = memory_plugin("keys", "create", "--data-dir", str(data_dir), "--org", "org-1", "--user", "bob")
        assert created.returncode == 0, created.stderr
        token = created.stdout.strip().splitlines()[-1].split()[-1]
        assert create_memory(first, token) == 200, "a key made beside the server works at once"

        first.kill()  # SIGKILL: the kernel drops the lock with the process
    finally:
        first.kill()
    with LiveServer(data_dir) as again:
        assert again.process is not None and again.process.poll() is None
