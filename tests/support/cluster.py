"""A scale-out deployment for system tests: server processes over real OpenSearch nodes, and its faults.

Every store is on OpenSearch (two regions, the home one also holding memory, agentic memory and their
queues); the server processes share nothing but OpenSearch and one keys file.  Faults are real: SIGKILL of
a server process (restarted on the same port), SIGSTOP/SIGCONT of a node's JVM.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.support.live import STARTUP_SECONDS, LiveServer
from tests.support.opensearch import OpenSearchNode, http_json


def scale_out_config(path: Path, regions: dict[str, str], index_prefix: str, home: str = "USA") -> Path:
    """A TOML config with every region on OpenSearch (``regions``: name -> URL), the home region first."""
    lines = [f'home_region = "{home}"', "search_deadline = 2.0", ""]
    for name, url in regions.items():
        lines += [
            f"[regions.{name}]",
            'store = "opensearch"',
            f'hosts = ["{url}"]',
            f'index_prefix = "{index_prefix}"',
            "timeout = 20.0",  # index creation on a loaded 2-core host takes seconds
            "",
        ]
    path.write_text("\n".join(lines))
    return path


class ServerGroup:
    """N ``memory-plugin serve`` processes on one data folder (keys only: every store is on OpenSearch)."""

    def __init__(self, count: int, data_dir: Path, env: dict[str, str], config: Path) -> None:
        self.servers = [LiveServer(data_dir, env=env, config=config) for _ in range(count)]

    @property
    def urls(self) -> list[str]:
        return [server.url for server in self.servers]

    def start_all(self, timeout: float = STARTUP_SECONDS) -> None:
        """The first alone (it creates the indices, which the others then find), the others in parallel."""
        self.servers[0].start(timeout)
        with ThreadPoolExecutor(len(self.servers)) as pool:
            for future in [pool.submit(server.start, timeout) for server in self.servers[1:]]:
                future.result()

    def kill(self, index: int) -> int | None:
        """SIGKILL, as a crash or the OOM killer would; returns the pid killed."""
        process = self.servers[index].process
        pid = process.pid if process is not None else None
        self.servers[index].kill()
        return pid

    async def restart(self, index: int, timeout: float = 120.0) -> None:
        """Start the killed server again on the same port (off the event loop: it waits for the model)."""
        await asyncio.get_running_loop().run_in_executor(None, self.servers[index].start, timeout)

    def running(self, index: int) -> bool:
        process = self.servers[index].process
        return process is not None and process.poll() is None

    def close(self) -> None:
        for server in self.servers:
            server.kill()

    def log_tails(self, chars: int = 1500) -> str:
        tails = []
        for server in self.servers:
            if server.log_path.exists():
                tails.append(f"--- {server.log_path} ---\n{server.log_path.read_text(errors='replace')[-chars:]}")
        return "\n".join(tails)


def _signal_node(node: OpenSearchNode, sig: signal.Signals) -> None:
    """The node runs in a session of its own (its pid leads the group: setpriv and the launcher script exec
    into the JVM), so the group signal reaches the JVM whichever user it runs as."""
    assert node.pid is not None and node.is_running(), node
    os.killpg(node.pid, sig)


@contextlib.contextmanager
def paused(node: OpenSearchNode) -> Iterator[None]:
    """The node's JVM stopped (SIGSTOP) for the block: its sockets stay open but nothing answers.
    Always continued afterwards, since the nodes are shared by the whole test session."""
    _signal_node(node, signal.SIGSTOP)
    try:
        yield
    finally:
        _signal_node(node, signal.SIGCONT)


def jvm_state(node: OpenSearchNode, wanted: str = "T", timeout: float = 5.0) -> str:
    """The JVM's scheduler state letter from /proc (``T`` when stopped), once it is ``wanted`` or after
    ``timeout`` (a group stop reaches every thread of a busy JVM within a moment, not at once)."""
    assert node.pid is not None
    deadline = time.monotonic() + timeout
    while True:
        stat = Path(f"/proc/{node.pid}/stat").read_text()
        state = stat.rsplit(")", 1)[1].split()[0]
        if state == wanted or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def search_all(url: str, index: str, query: dict[str, Any], fields: Sequence[str]) -> list[dict[str, Any]]:
    """Every hit of ``query`` in ``index`` (refreshed first), up to 10000: ``_id``, ``_index`` and ``fields``."""
    http_json(f"{url}/{index}/_refresh", "POST")
    body = {"size": 10_000, "query": query, "_source": list(fields)}
    status, answer = http_json(f"{url}/{index}/_search?ignore_unavailable=true&allow_no_indices=true", "POST", body)
    assert status == 200, answer
    return [{"_id": hit["_id"], "_index": hit["_index"], **hit["_source"]} for hit in answer["hits"]["hits"]]


def count(url: str, index: str, query: dict[str, Any] | None = None) -> int:
    """Documents in ``index`` (0 if it does not exist), after a refresh."""
    http_json(f"{url}/{index}/_refresh", "POST")
    status, answer = http_json(
        f"{url}/{index}/_count?ignore_unavailable=true&allow_no_indices=true",
        "POST",
        {"query": query or {"match_all": {}}},
    )
    assert status == 200, answer
    return int(answer["count"])
