"""Real servers for tests that need a socket (a process of its own where a SIGKILL matters), and the scripts."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]

#: How long a server may take to load its model and answer: minutes on a machine busy with other work.
STARTUP_SECONDS = 300.0


def run_script(name: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``scripts/<name>`` run by this Python from the repository root, its output captured as text."""
    command = [sys.executable, str(ROOT / "scripts" / name), *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def key_headers(data_dir: Path, organization_id: str = "org-1", user_id: str | None = "alice") -> dict[str, str]:
    """A new key in ``data_dir``'s keys file, as the headers that present it."""
    from memory_plugin.auth import KeyStore

    _, token = KeyStore(data_dir / "keys.json").create(organization_id, user_id)
    return {"Authorization": f"Bearer {token}"}


def fault_random() -> random.Random:
    """Randomness for a fault test: seeded from ``FAULT_SEED`` to replay a failure, else from the clock (printed)."""
    seed = int(os.environ.get("FAULT_SEED", str(time.time_ns())))
    print(f"FAULT_SEED={seed}")
    return random.Random(seed)


def live_server_with_key(
    data_dir: Path, organization_id: str = "org-1", user_id: str | None = "alice", **kwargs: object
) -> LiveServer:
    """A started server whose keys file holds one key for the given principal."""
    from memory_plugin.auth import KeyStore

    _, token = KeyStore(data_dir / "keys.json").create(organization_id, user_id)
    server = LiveServer(data_dir, **kwargs)  # type: ignore[arg-type]
    server.token = token
    server.start()
    return server


class LiveServer:
    """``memory-plugin serve`` on a loopback port, with its own data folder."""

    def __init__(
        self,
        data_dir: Path,
        *,
        env: dict[str, str] | None = None,
        config: Path | None = None,
        args: list[str] | None = None,
        code: Path | None = None,
    ) -> None:
        """``code``: a folder holding another revision's ``memory_plugin`` to serve instead of this tree's."""
        self.data_dir = data_dir
        self.code = code
        self.args = list(args or [])
        self.port = free_port()
        self.env = {**os.environ, "MEMORY_PLUGIN_BRIDGE_ENABLED": "false", **(env or {})}
        if code is not None:
            self.env["PYTHONPATH"] = str(code)
        self.config = config
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"server-{self.port}.log"
        self.token = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = STARTUP_SECONDS) -> LiveServer:
        command = [sys.executable, "-m", "memory_plugin", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--data-dir", str(self.data_dir)]
        if self.config is not None:
            command += ["--config", str(self.config)]
        command += self.args
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(command, env=self.env, cwd=self.code, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.process.returncode}:\n{self.log_path.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(self.url + "/_health", timeout=10) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"server did not start in {timeout}s:\n{self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def terminate(self, timeout: float = 120.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


@contextmanager
def served_in_thread(app: web.Application) -> Iterator[str]:
    """``app`` on a loopback socket, served by an event loop of its own, for synchronous clients; yields its URL.

    Cheaper than a :class:`LiveServer` (no interpreter, no model to load) where a
    test needs a socket but not a process of its own, and the app may take the
    embedder double. Served by the runner ``serve`` uses, so that a request line over
    aiohttp's limit gets the same JSON 400 as in production.
    """
    from memory_plugin.http.runner import JsonErrorRunner

    loop = asyncio.new_event_loop()
    runner = JsonErrorRunner(app)  # as ``serve`` runs it: what aiohttp cannot parse is answered in the API's JSON
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
    host, port = runner.addresses[0][:2]
    thread = threading.Thread(target=loop.run_forever, name="served-in-thread", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.run_until_complete(runner.cleanup())
        loop.close()


@dataclass
class ServedApp:
    """What a test needs of an app served in a thread: where it is and a key to it."""

    url: str
    data_dir: Path
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@contextmanager
def app_in_thread_with_key(
    data_dir: Path, embedder: Any, organization_id: str = "org-1", user_id: str | None = "alice"
) -> Iterator[ServedApp]:
    """The whole app with ``embedder`` (the double, where vectors' meaning does not matter), one key, in a thread."""
    from memory_plugin.app import create_app
    from memory_plugin.auth import KeyStore
    from memory_plugin.settings import load_settings

    settings = load_settings(environ={}, data_dir=data_dir, http={"port": 0}, bridge={"enabled": False})
    _, token = KeyStore(settings.resolved_keys_file).create(organization_id, user_id)
    with served_in_thread(create_app(settings, embedder=embedder)) as url:
        yield ServedApp(url, data_dir, token)


def unavailable(reason: str) -> NoReturn:
    """Skip on a developer machine that lacks a tool; under ``CI=true`` that is a failure."""
    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: this test must run)")
    pytest.skip(reason)
