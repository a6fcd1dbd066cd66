"""Starting, stopping and talking to single-node clusters on loopback ports."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.opensearch.distribution import DEFAULT_HEAP, OpenSearchStartError, base_env, ensure_distribution
from tests.support.opensearch.runas import chown_tree, ensure_user, running_as_root, runtime_home

#: The environment variable naming where the suite's nodes keep their data (``make test``: tmpfs, where there is one).
NODE_DIR_VARIABLE = "TEST_NODE_DIR"


def suite_node_dir() -> str | None:
    """Where the suite's nodes keep config, data and logs: ``$TEST_NODE_DIR``, else the system's temporary folder.

    An index's creation and deletion each write the cluster state and fsync it: a create, one refreshed write
    and a delete took 768 ms on this machine's disk and 315 ms on tmpfs.  The scripts' nodes, which stand for a
    deployment, stay on the disk."""
    return os.environ.get(NODE_DIR_VARIABLE) or None


# --------------------------------------------------------------------------- ports / http


def free_port(exclude: set[int] | None = None) -> int:
    """A currently free TCP port on 127.0.0.1 (not in *exclude*)."""
    exclude = exclude or set()
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in exclude:
            return port
    raise RuntimeError("no free port found")


def http_json(url: str, method: str = "GET", body: Any = None, timeout: float = 30) -> tuple[int, Any]:
    """Tiny stdlib HTTP client: returns (status, parsed JSON or text)."""
    data = None
    headers = {"Accept": "application/json"}
    if body is not None:
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        else:
            data = body.encode() if isinstance(body, str) else body
            headers["Content-Type"] = "application/x-ndjson"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


# --------------------------------------------------------------------------- nodes

_live_nodes: set[OpenSearchNode] = set()
_all_nodes: set[OpenSearchNode] = set()
_live_lock = threading.Lock()


def _set_pdeathsig() -> None:
    """preexec_fn (non-root case): SIGTERM the node when the thread that forked it dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _setpriv_supports_pdeathsig() -> bool:
    exe = shutil.which("setpriv")
    if not exe:
        return False
    proc = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return "--pdeathsig" in proc.stdout


class OpenSearchNode:
    """One single-node OpenSearch cluster on 127.0.0.1 with its own ports, config, data and logs.

    ``stop()`` keeps the data (so ``start()`` brings the same "region" back with its indices);
    ``close()`` stops and deletes the temp folder.
    """

    def __init__(
        self,
        name: str = "node-0",
        *,
        home: Path | str | None = None,
        http_port: int | None = None,
        transport_port: int | None = None,
        heap: str = DEFAULT_HEAP,
        base_dir: Path | str | None = None,
        cluster_name: str | None = None,
        extra_settings: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self._home_arg = home
        self.home: Path | None = None
        self.http_port = http_port or free_port()
        self.transport_port = transport_port or free_port({self.http_port})
        self.heap = heap
        self.cluster_name = cluster_name or f"memplug-{name}-{self.http_port}"
        self.extra_settings = dict(extra_settings or {})
        self.base_dir = Path(tempfile.mkdtemp(prefix=f"opensearch-{name}-", dir=base_dir))
        self.config_dir = self.base_dir / "config"
        self.data_dir = self.base_dir / "data"
        self.logs_dir = self.base_dir / "logs"
        self.tmp_dir = self.base_dir / "tmp"
        self.process: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None
        self._stdout: Any = None
        self._started_at = 0.0
        with _live_lock:
            _all_nodes.add(self)  # closed (temp folder removed) at interpreter exit at the latest

    # -- properties
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"OpenSearchNode({self.name!r}, {self.url}, {state})"

    # -- setup
    def _prepare(self) -> tuple[Path, dict[str, Any]]:
        home = ensure_distribution(self._home_arg)
        popen_kw: dict[str, Any] = {}
        uid = gid = None
        if running_as_root():
            user = ensure_user()
            uid, gid = user.pw_uid, user.pw_gid
            home = runtime_home(home)
            popen_kw.update(user=uid, group=gid, extra_groups=[])
        self.home = home
        first = not self.config_dir.exists()
        if first:
            shutil.copytree(home / "config", self.config_dir)
        for d in (self.data_dir, self.logs_dir, self.tmp_dir):
            d.mkdir(parents=True, exist_ok=True)
        settings: dict[str, Any] = {
            "cluster.name": self.cluster_name,
            "node.name": self.name,
            "path.data": str(self.data_dir),
            "path.logs": str(self.logs_dir),
            "network.host": "127.0.0.1",
            "http.port": self.http_port,
            "transport.port": self.transport_port,
            "discovery.type": "single-node",
            "bootstrap.memory_lock": False,
            "cluster.routing.allocation.disk.threshold_enabled": False,
            "action.destructive_requires_name": False,
        }
        settings.update(self.extra_settings)
        (self.config_dir / "opensearch.yml").write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
        jvm = (home / "config" / "jvm.options").read_text()
        jvm = (
            jvm.replace("-Xms1g", f"-Xms{self.heap}")
            .replace("-Xmx1g", f"-Xmx{self.heap}")
            .replace("HeapDumpPath=data", f"HeapDumpPath={self.data_dir}")
            .replace("logs/", f"{self.logs_dir}/")
        )
        (self.config_dir / "jvm.options").write_text(jvm)
        if uid is not None:
            os.chmod(self.base_dir, 0o755)
            chown_tree(self.base_dir, uid, gid)  # type: ignore[arg-type]
        return home, popen_kw

    # -- lifecycle
    def start(self, wait: bool = True, timeout: float = 180) -> OpenSearchNode:
        """Launch the node (no-op if running); with *wait*, block until green."""
        if self.is_running():
            return self
        home, popen_kw = self._prepare()
        env = base_env()
        env.update(
            OPENSEARCH_PATH_CONF=str(self.config_dir),
            OPENSEARCH_TMPDIR=str(self.tmp_dir),
            OPENSEARCH_JAVA_OPTS=f"-Xms{self.heap} -Xmx{self.heap}",
            HOME=str(self.base_dir),
        )
        self._stdout = open(self.logs_dir / "stdout.log", "ab")
        if popen_kw.get("user") is not None:
            os.chown(self.logs_dir / "stdout.log", popen_kw["user"], popen_kw["group"])
        cmd = [str(home / "bin" / "opensearch")]
        if threading.current_thread() is threading.main_thread():
            # The node gets SIGTERM when we die, even by SIGKILL (no orphaned JVMs).  Only from
            # the main thread: PDEATHSIG fires when the *thread* that forked exits.
            if "user" not in popen_kw:
                popen_kw["preexec_fn"] = _set_pdeathsig
            elif _setpriv_supports_pdeathsig():
                # Python's own setuid + prctl loses the death signal; util-linux setpriv keeps it
                cmd = [
                    "setpriv",
                    f"--reuid={popen_kw['user']}",
                    f"--regid={popen_kw['group']}",
                    "--clear-groups",
                    "--pdeathsig=TERM",
                    "--",
                    *cmd,
                ]
                popen_kw = {}
        self._started_at = time.monotonic()
        self.process = subprocess.Popen(
            cmd,
            cwd=str(home),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **popen_kw,
        )
        with _live_lock:
            _live_nodes.add(self)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 180) -> None:
        """Poll ``_cluster/health?wait_for_status=green`` until green; raise with the log tail on failure."""
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if not self.is_running():
                code = self.process.returncode if self.process else None
                raise OpenSearchStartError(
                    f"OpenSearch node {self.name} exited with code {code} during startup.\n{self.log_tail()}"
                )
            try:
                status, body = http_json(f"{self.url}/_cluster/health?wait_for_status=green&timeout=2s", timeout=5)
                if status == 200 and isinstance(body, dict) and body.get("status") == "green":
                    self.start_seconds = time.monotonic() - self._started_at
                    return
                last = f"HTTP {status}: {body}"
            except (OSError, urllib.error.URLError) as exc:
                last = repr(exc)
            time.sleep(0.5)
        tail = self.log_tail()
        self.stop()
        raise OpenSearchStartError(
            f"OpenSearch node {self.name} at {self.url} not green after {timeout}s (last: {last}).\n{tail}"
        )

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM, wait up to *timeout*, then SIGKILL. Keeps data for a later ``start()``."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None
        with _live_lock:
            _live_nodes.discard(self)

    def close(self) -> None:
        """Stop and delete the node's temp folder (config, data, logs)."""
        self.stop()
        shutil.rmtree(self.base_dir, ignore_errors=True)
        with _live_lock:
            _all_nodes.discard(self)

    def restart(self, wait: bool = True, timeout: float = 180) -> OpenSearchNode:
        self.stop()
        return self.start(wait=wait, timeout=timeout)

    def log_tail(self, lines: int = 60) -> str:
        """The first error lines and the last *lines* lines of the node's console log."""
        for f in (self.logs_dir / "stdout.log", self.logs_dir / f"{self.cluster_name}.log"):
            if f.is_file():
                all_lines = f.read_text(errors="replace").splitlines()
                errors = [
                    ln
                    for ln in all_lines
                    if any(m in ln for m in ("ERROR", "FATAL", "Exception:", "Error:", "fatal error"))
                ][:6]
                tail = all_lines[-lines:]
                head = ("--- first error lines ---\n" + "\n".join(errors) + "\n") if errors else ""
                return f"{head}--- last {len(tail)} lines of {f} ---\n" + "\n".join(tail)
        return f"(no log in {self.logs_dir})"

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        return http_json(self.url + path, method, body, timeout)


def stop_all(nodes: Sequence[OpenSearchNode] | None = None, *, cleanup: bool = True) -> None:
    """Stop (and with *cleanup*, delete) *nodes* -- default: every node of this process -- concurrently."""
    if nodes is None:
        with _live_lock:
            nodes = list(_all_nodes if cleanup else _live_nodes)
    threads = [threading.Thread(target=(n.close if cleanup else n.stop)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


atexit.register(stop_all)


class OpenSearchCluster:
    """N independent single-node clusters ("regions"); a context manager."""

    def __init__(
        self,
        n: int = 1,
        *,
        home: Path | str | None = None,
        heap: str = DEFAULT_HEAP,
        name_prefix: str = "region",
        timeout: float = 240,
        base_dir: Path | str | None = None,
    ) -> None:
        self.n, self.home, self.heap, self.timeout = n, home, heap, timeout
        self.name_prefix, self.base_dir = name_prefix, base_dir
        self.nodes: list[OpenSearchNode] = []

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def start(self) -> list[OpenSearchNode]:
        ensure_distribution(self.home)  # once, before the nodes race for it
        ports: set[int] = set()
        for i in range(self.n):
            hp = free_port(ports)
            ports.add(hp)
            tp = free_port(ports)
            ports.add(tp)
            self.nodes.append(
                OpenSearchNode(
                    f"{self.name_prefix}-{i}",
                    home=self.home,
                    http_port=hp,
                    transport_port=tp,
                    heap=self.heap,
                    base_dir=self.base_dir,
                )
            )
        try:
            for node in self.nodes:  # launch all, then wait: startups overlap
                node.start(wait=False)
            for node in self.nodes:
                node.wait_ready(self.timeout)
        except BaseException:
            self.stop_all()
            raise
        return self.nodes

    def stop_all(self) -> None:
        stop_all(self.nodes)

    def __enter__(self) -> list[OpenSearchNode]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


@contextlib.contextmanager
def start_nodes(n: int = 1, **kwargs: Any) -> Iterator[list[OpenSearchNode]]:
    """``with start_nodes(2) as nodes:`` -- N green single-node clusters, removed afterwards."""
    cluster = OpenSearchCluster(n, **kwargs)
    try:
        yield cluster.start()
    finally:
        cluster.stop_all()
