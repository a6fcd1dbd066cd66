#!/usr/bin/env python3
"""Real OpenSearch 2.19.1 nodes (with the k-NN plugin) for tests and benchmarks.

Everything comes from Maven Central through Maven's own client (``mvn``), so the
only prerequisites are Java 17+ and Maven.  Downloads stay in ``~/.m2``; the
unpacked distribution is cached in ``~/.cache/memory_plugin/opensearch-2.19.1``
(override with ``MEMORY_PLUGIN_OPENSEARCH_HOME`` or ``--home``).

The integ-test distribution ships only the ``transport-netty4`` module and no
security plugin.  The k-NN plugin declares ``extended.plugins=lang-painless``,
so the helper assembles the ``lang-painless`` module from its Maven jars
(``org.opensearch.plugin:lang-painless:2.19.1`` and its pom dependencies)
before installing k-NN.

OpenSearch refuses to run as root.  When this process is root, each node runs
as an unprivileged system user (default ``opensearch``, override with
``MEMORY_PLUGIN_OPENSEARCH_USER``), created with ``useradd`` on first use; its
data/log/config folders are chowned to that user, and the distribution is
mirrored to a world-readable folder when the cache lives under an unreadable
home (``/root`` is mode 0700).  The user switch goes through util-linux ``setpriv`` with
``--pdeathsig=TERM`` so a node never outlives the Python process that started it (even
after SIGKILL); without setpriv, ``subprocess.Popen(user=...)`` is used.

k-NN engines: only ``lucene`` works.  The Maven Central k-NN zip has no JNI libraries, and
the first flush of a ``faiss`` or ``nmslib`` index -- including an hnsw field with no
``engine`` given, since the 2.19 default is faiss -- throws UnsatisfiedLinkError, which
kills the node.  Always set ``"engine": "lucene"``.  Its cosinesimil score is ``(1 + cos) / 2``.

CLI::

    python scripts/opensearch_nodes.py fetch               # provision only (CI)
    python scripts/opensearch_nodes.py start --nodes 2     # run until Ctrl-C/SIGTERM
    python scripts/opensearch_nodes.py stop                # stop a running `start`
    python scripts/opensearch_nodes.py engines             # which k-NN engines work

Python::

    from scripts.opensearch_nodes import start_nodes
    with start_nodes(2) as nodes:
        urls = [n.url for n in nodes]
        nodes[1].stop()     # simulate a failed region
        nodes[1].start()    # bring it back (same ports, same data)
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import math
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

OPENSEARCH_VERSION = "2.19.1"
KNN_VERSION = "2.19.1.0"
DIST_ARTIFACT = f"org.opensearch.distribution.integ-test-zip:opensearch:{OPENSEARCH_VERSION}:zip"
KNN_ARTIFACT = f"org.opensearch.plugin:opensearch-knn:{KNN_VERSION}:zip"
# lang-painless is a module of the full distribution but absent from the
# integ-test zip; k-NN extends it.  Jars (from lang-painless-2.19.1.pom):
PAINLESS_ARTIFACTS = (
    f"org.opensearch.plugin:lang-painless:{OPENSEARCH_VERSION}:jar",
    f"org.opensearch.plugin:opensearch-scripting-painless-spi:{OPENSEARCH_VERSION}:jar",
    "org.antlr:antlr4-runtime:4.13.1:jar",
    "org.ow2.asm:asm:9.7:jar",
    "org.ow2.asm:asm-util:9.7:jar",
    "org.ow2.asm:asm-tree:9.7:jar",
    "org.ow2.asm:asm-commons:9.7:jar",
    "org.ow2.asm:asm-analysis:9.7:jar",
)
PAINLESS_DESCRIPTOR = f"""\
description=An easy, safe and fast scripting language for OpenSearch
version={OPENSEARCH_VERSION}
name=lang-painless
classname=org.opensearch.painless.PainlessPlugin
java.version=11
opensearch.version={OPENSEARCH_VERSION}
extended.plugins=
has.native.controller=false
"""
PAINLESS_POLICY = """\
grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";
  // needed to find the classloader to load whitelisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
"""

HOME_ENV = "MEMORY_PLUGIN_OPENSEARCH_HOME"
USER_ENV = "MEMORY_PLUGIN_OPENSEARCH_USER"
DEFAULT_USER = "opensearch"
DEFAULT_HEAP = "512m"
INSTALLED_STAMP = ".memory_plugin-installed"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STATE_FILE = PROJECT_ROOT / ".cache" / "opensearch-nodes.json"

_install_lock = threading.Lock()


class OpenSearchSetupError(RuntimeError):
    """Fetching, unpacking or installing the distribution failed."""


class OpenSearchStartError(RuntimeError):
    """A node did not start (or did not become green) in time."""


def _log(msg: str) -> None:
    print(f"[opensearch_nodes] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- prerequisites


def distribution_installed(home: Path | str | None = None) -> bool:
    """True when the cached install (OpenSearch + lang-painless + k-NN) is complete."""
    home = Path(home).expanduser() if home else default_home()
    return (home / INSTALLED_STAMP).is_file() and _knn_installed(home)


def missing_prerequisites(home: Path | str | None = None) -> list[str]:
    """Missing tools: ``java`` always needed, ``mvn`` only until the distribution is cached."""
    missing = [] if _java_home() else ["java"]
    if shutil.which("mvn") is None and not distribution_installed(home):
        missing.append("mvn")
    return missing


def _java_home() -> str | None:
    for var in ("OPENSEARCH_JAVA_HOME", "JAVA_HOME"):
        value = os.environ.get(var)
        if value and Path(value, "bin", "java").exists():
            return value
    java = shutil.which("java")
    if java:
        return str(Path(os.path.realpath(java)).parent.parent)
    return None


def default_home() -> Path:
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".cache" / "memory_plugin" / f"opensearch-{OPENSEARCH_VERSION}"


# --------------------------------------------------------------------------- fetch / install


def _run(cmd: Sequence[str], *, what: str, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    try:
        proc = subprocess.run(
            list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=timeout
        )
    except FileNotFoundError as exc:
        raise OpenSearchSetupError(f"{what}: command not found: {cmd[0]!r} ({exc})") from exc
    except subprocess.TimeoutExpired as exc:
        raise OpenSearchSetupError(f"{what}: timed out after {timeout}s: {' '.join(cmd)}") from exc
    if proc.returncode != 0:
        raise OpenSearchSetupError(
            f"{what} failed (exit {proc.returncode}).\nCommand: {' '.join(cmd)}\nOutput:\n{proc.stdout.strip()[-6000:]}"
        )
    return proc.stdout


def maven_fetch(artifact: str, dest: Path) -> Path:
    """Copy ``G:A:V:type`` from Maven Central (via ``~/.m2``) into *dest*; return the file."""
    group, art, version, packaging = artifact.split(":")
    target = dest / f"{art}-{version}.{packaging}"
    if target.is_file() and target.stat().st_size > 0:
        return target
    if shutil.which("mvn") is None:
        raise OpenSearchSetupError("Maven ('mvn') is not on PATH; it is needed to fetch " + artifact)
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-U",
        "-Dstyle.color=never",
        "dependency:copy",
        f"-Dartifact={artifact}",
        f"-DoutputDirectory={dest}",
    ]
    out = _run(cmd, what=f"Fetching {artifact} from Maven Central")
    if not target.is_file():
        raise OpenSearchSetupError(
            f"Fetching {artifact}: Maven succeeded but {target} is missing.\nCommand: {' '.join(cmd)}\nOutput:\n{out}"
        )
    return target


def _knn_installed(home: Path) -> bool:
    return (home / "plugins" / "opensearch-knn" / "plugin-descriptor.properties").is_file()


def _install_painless(home: Path, downloads: Path) -> None:
    module = home / "modules" / "lang-painless"
    if (module / "plugin-descriptor.properties").is_file():
        return
    tmp = home / "modules" / ".lang-painless.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for artifact in PAINLESS_ARTIFACTS:
        shutil.copy2(maven_fetch(artifact, downloads), tmp)
    (tmp / "plugin-descriptor.properties").write_text(PAINLESS_DESCRIPTOR)
    (tmp / "plugin-security.policy").write_text(PAINLESS_POLICY)
    tmp.rename(module)


def ensure_distribution(home: Path | str | None = None) -> Path:
    """Fetch, unpack and install OpenSearch + lang-painless + k-NN once; return OPENSEARCH_HOME.

    Idempotent: a stamp file marks a complete install; a half-finished unpack is redone.
    """
    home = Path(home).expanduser().resolve() if home else default_home()
    stamp = home / INSTALLED_STAMP
    with _install_lock, _file_lock(home.parent / f".{home.name}.lock"):
        if stamp.is_file() and _knn_installed(home):
            return home
        missing = missing_prerequisites(home)
        if missing:
            raise OpenSearchSetupError(f"missing prerequisites: {', '.join(missing)} (need Java 17+ and Maven)")
        t0 = time.monotonic()
        downloads = home.parent / "downloads"
        dist_zip = maven_fetch(DIST_ARTIFACT, downloads)
        knn_zip = maven_fetch(KNN_ARTIFACT, downloads)
        if not (home / "bin" / "opensearch").is_file():
            staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=home.parent))
            try:
                with zipfile.ZipFile(dist_zip) as zf:
                    zf.extractall(staging)
                    # zipfile drops unix permissions; restore them
                    for info in zf.infolist():
                        mode = (info.external_attr >> 16) & 0o777
                        if mode:
                            os.chmod(staging / info.filename, mode)
                unpacked = staging / f"opensearch-{OPENSEARCH_VERSION}"
                for script in (unpacked / "bin").iterdir():
                    script.chmod(0o755)
                shutil.rmtree(home, ignore_errors=True)
                unpacked.rename(home)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        _install_painless(home, downloads)
        if not _knn_installed(home):
            shutil.rmtree(home / "plugins" / "opensearch-knn", ignore_errors=True)
            env = _base_env()
            _run(
                [str(home / "bin" / "opensearch-plugin"), "install", "--batch", knn_zip.resolve().as_uri()],
                what="Installing the k-NN plugin",
                env=env,
            )
        _make_world_readable(home)  # config/* ships as 0660; other users (the node user) must read it
        stamp.write_text(json.dumps({"opensearch": OPENSEARCH_VERSION, "knn": KNN_VERSION, "time": time.time()}))
        _log(f"OpenSearch {OPENSEARCH_VERSION} + k-NN ready in {home} ({time.monotonic() - t0:.1f}s)")
        return home


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:  # someone else's lock file: a read-only fd can still flock
        fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _make_world_readable(path: Path) -> None:
    for root, dirs, files in os.walk(path):
        for d in dirs:
            p = os.path.join(root, d)
            os.chmod(p, os.stat(p).st_mode | 0o755)
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o644)


def _base_env() -> dict[str, str]:
    env = dict(os.environ)
    java_home = _java_home()
    if java_home:
        env["OPENSEARCH_JAVA_HOME"] = java_home
    env.pop("OPENSEARCH_PATH_CONF", None)
    env.pop("OPENSEARCH_JAVA_OPTS", None)
    return env


# --------------------------------------------------------------------------- root handling


def _running_as_root() -> bool:
    return os.geteuid() == 0


def ensure_user(name: str | None = None) -> pwd.struct_passwd:
    """Return (creating if needed) the unprivileged user that runs nodes when we are root."""
    name = name or os.environ.get(USER_ENV) or DEFAULT_USER
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    attempts = [
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ],
        ["adduser", "-S", "-D", "-H", "-s", "/sbin/nologin", name],  # busybox/alpine
    ]
    errors = []
    for cmd in attempts:
        if shutil.which(cmd[0]) is None:
            continue
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)  # also covers a concurrent creator
        errors.append(f"{' '.join(cmd)} -> exit {proc.returncode}: {proc.stdout.strip()}")
    raise OpenSearchSetupError(
        f"running as root and could not create unprivileged user {name!r} for OpenSearch "
        f"(OpenSearch refuses to run as root): {'; '.join(errors) or 'no useradd/adduser'}"
    )


def _world_traversable(path: Path) -> bool:
    """True when every ancestor is o+x and the path itself o+rx (so any user can read it)."""
    path = path.resolve()
    for p in [path, *path.parents]:
        mode = p.stat().st_mode
        if not mode & 0o001:
            return False
    return bool(path.stat().st_mode & 0o004)


def _runtime_home(home: Path) -> Path:
    """When root: a copy of *home* the unprivileged node user can read (hard links when possible)."""
    if _world_traversable(home):
        return home
    _make_world_readable(home)
    stamp = (home / INSTALLED_STAMP).read_text()
    mirror = Path(tempfile.gettempdir()) / f"memory_plugin-opensearch-{OPENSEARCH_VERSION}-runtime"
    with _file_lock(Path(tempfile.gettempdir()) / f".memory_plugin-opensearch-{OPENSEARCH_VERSION}-runtime.lock"):
        if (mirror / INSTALLED_STAMP).is_file() and (mirror / INSTALLED_STAMP).read_text() == stamp:
            return mirror
        staging = Path(tempfile.mkdtemp(prefix=".mirror-", dir=mirror.parent))
        target = staging / "home"

        def link_or_copy(src: str, dst: str) -> None:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)

        shutil.copytree(home, target, copy_function=link_or_copy, symlinks=True)
        for p in [target, *target.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        staging.chmod(0o755)
        shutil.rmtree(mirror, ignore_errors=True)
        target.rename(mirror)
        shutil.rmtree(staging, ignore_errors=True)
        return mirror


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            os.lchown(os.path.join(root, n), uid, gid)


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
        if _running_as_root():
            user = ensure_user()
            uid, gid = user.pw_uid, user.pw_gid
            home = _runtime_home(home)
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
            _chown_tree(self.base_dir, uid, gid)  # type: ignore[arg-type]
        return home, popen_kw

    # -- lifecycle
    def start(self, wait: bool = True, timeout: float = 180) -> OpenSearchNode:
        """Launch the node (no-op if running); with *wait*, block until green."""
        if self.is_running():
            return self
        home, popen_kw = self._prepare()
        env = _base_env()
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


# --------------------------------------------------------------------------- k-NN engine check

_ENGINE_VECTORS = {
    "a": [1.0, 0.0, 0.0, 0.0],
    "b": [0.8, 0.6, 0.0, 0.0],
    "c": [0.0, 1.0, 0.0, 0.0],
    "d": [-1.0, 0.2, 0.1, 0.0],
    "e": [0.5, 0.5, 0.5, 0.5],
}
_QUERY = [0.9, 0.3, 0.1, 0.2]
_SCORE_FORMULAS = {
    "(1 + cos) / 2": lambda c: (1 + c) / 2,
    "1 / (2 - cos)  [= 1 / (1 + (1 - cos))]": lambda c: 1 / (2 - c),
    "cos": lambda c: c,
    "1 + cos": lambda c: 1 + c,
}


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def check_knn_engine(url: str, engine: str) -> dict[str, Any]:
    """Create a cosinesimil hnsw index for *engine*, index docs, run filtered + plain knn queries."""
    index = f"knn-engine-check-{engine}"
    result: dict[str, Any] = {"engine": engine, "works": False}
    with contextlib.suppress(Exception):
        http_json(f"{url}/{index}", "DELETE")
    mapping = {
        "settings": {"index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 0}},
        "mappings": {
            "properties": {
                "vec": {
                    "type": "knn_vector",
                    "dimension": 4,
                    "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": engine},
                },
                "tag": {"type": "keyword"},
            }
        },
    }
    try:
        status, body = http_json(f"{url}/{index}", "PUT", mapping)
        if status != 200:
            result["error"] = f"create index: HTTP {status}: {body}"
            return result
        bulk = "".join(
            json.dumps({"index": {"_index": index, "_id": k}})
            + "\n"
            + json.dumps({"vec": v, "tag": "even" if i % 2 == 0 else "odd"})
            + "\n"
            for i, (k, v) in enumerate(_ENGINE_VECTORS.items())
        )
        status, body = http_json(f"{url}/_bulk?refresh=true", "POST", bulk)
        if status != 200 or body.get("errors"):
            result["error"] = f"bulk: HTTP {status}: {str(body)[:2000]}"
            return result
        status, body = http_json(
            f"{url}/{index}/_search", "POST", {"size": 5, "query": {"knn": {"vec": {"vector": _QUERY, "k": 5}}}}
        )
        if status != 200:
            result["error"] = f"knn query: HTTP {status}: {str(body)[:2000]}"
            return result
        hits = body["hits"]["hits"]
        pairs = [(_cos(_QUERY, _ENGINE_VECTORS[h["_id"]]), h["_score"]) for h in hits]
        result["hits"] = [
            {"id": h["_id"], "score": h["_score"], "cos": round(_cos(_QUERY, _ENGINE_VECTORS[h["_id"]]), 6)}
            for h in hits
        ]
        result["score_formula"] = next(
            (name for name, f in _SCORE_FORMULAS.items() if pairs and all(abs(f(c) - s) < 1e-4 for c, s in pairs)),
            "unknown",
        )
        status, body = http_json(
            f"{url}/{index}/_search",
            "POST",
            {"size": 3, "query": {"knn": {"vec": {"vector": _QUERY, "k": 3, "filter": {"term": {"tag": "even"}}}}}},
        )
        if status != 200:
            result["filter_error"] = f"HTTP {status}: {str(body)[:2000]}"
            result["efficient_filter"] = False
        else:
            ids = [h["_id"] for h in body["hits"]["hits"]]
            result["filtered_ids"] = ids
            result["efficient_filter"] = bool(ids) and set(ids) <= {"a", "c", "e"}
        result["works"] = True
        return result
    except Exception as exc:  # report, never crash the check
        result["error"] = repr(exc)
        return result
    finally:
        with contextlib.suppress(Exception):
            http_json(f"{url}/{index}", "DELETE")


NATIVE_ENGINES = ("faiss", "nmslib")


def native_knn_libraries(home: Path | str | None = None) -> list[Path]:
    """The k-NN JNI libraries (libopensearchknn_*.so) present in the install; empty for the Maven zip."""
    home = Path(home) if home else default_home()
    return sorted((home / "plugins" / "opensearch-knn").rglob("libopensearchknn_*"))


def check_knn_engines(
    url: str,
    engines: Sequence[str] = ("lucene", "faiss", "nmslib"),
    *,
    home: Path | str | None = None,
    unsafe: bool = False,
) -> dict[str, dict[str, Any]]:
    """Check each engine on the node at *url*.

    Native engines (faiss, nmslib) are only tried when their JNI libraries are installed or
    *unsafe* is set: without them the first flush of a native index throws UnsatisfiedLinkError,
    which OpenSearch treats as fatal -- the whole node exits.
    """
    results = {}
    has_native = bool(native_knn_libraries(home))
    for engine in engines:
        if engine in NATIVE_ENGINES and not (has_native or unsafe):
            results[engine] = {
                "engine": engine,
                "works": False,
                "error": "k-NN JNI libraries (libopensearchknn_*.so) are not in the Maven Central plugin zip; "
                "indexing into a native-engine index kills the node (UnsatisfiedLinkError is fatal). "
                "Not tried; use `engines --isolated` to try it on a throwaway node.",
            }
            continue
        results[engine] = check_knn_engine(url, engine)
    return results


def check_knn_engines_isolated(
    engines: Sequence[str] = ("lucene", "faiss", "nmslib"), *, home: Path | str | None = None
) -> dict[str, dict[str, Any]]:
    """Try every engine on its own throwaway node (a crash of one cannot hide another's result)."""
    results = {}
    for engine in engines:
        with start_nodes(1, home=home, name_prefix=f"engine-{engine}") as nodes:
            res = check_knn_engine(nodes[0].url, engine)
            if not res["works"] and nodes[0].process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    nodes[0].process.wait(10)  # a fatal error takes a moment to end the JVM
            if not nodes[0].is_running():
                res["works"] = False
                res["node_crashed"] = True
                res["log_tail"] = [
                    line
                    for line in nodes[0].log_tail(400).splitlines()
                    if "UnsatisfiedLinkError" in line or "fatal error" in line
                ][:4]
            results[engine] = res
    return results


# --------------------------------------------------------------------------- CLI


def _cmd_fetch(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    home = ensure_distribution(args.home)
    print(f"{home}  ({time.monotonic() - t0:.1f}s)")
    return 0


def _cmd_start(args: argparse.Namespace) -> int:
    state = Path(args.state_file)
    stop_event = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop_event.set())
    t0 = time.monotonic()
    cluster = OpenSearchCluster(args.nodes, home=args.home, heap=args.heap)
    try:
        nodes = cluster.start()
        info = {
            "pid": os.getpid(),
            "started": time.time(),
            "nodes": [
                {
                    "name": n.name,
                    "url": n.url,
                    "http_port": n.http_port,
                    "transport_port": n.transport_port,
                    "pid": n.pid,
                    "dir": str(n.base_dir),
                    "cluster_name": n.cluster_name,
                }
                for n in nodes
            ],
            "urls": [n.url for n in nodes],
        }
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps(info, indent=2))
        print(f"{len(nodes)} node(s) green in {time.monotonic() - t0:.1f}s; state in {state}", file=sys.stderr)
        for n in nodes:
            print(n.url, flush=True)
        reported: set[str] = set()
        while not stop_event.wait(1):
            for n in nodes:
                if not n.is_running() and n.name not in reported:
                    reported.add(n.name)  # keep the others running (a "failed region" is legitimate)
                    _log(
                        f"node {n.name} ({n.url}) exited with code {n.process.returncode if n.process else None}:"
                        f"\n{n.log_tail(20)}"
                    )
            if len(reported) == len(nodes):
                _log("all nodes have exited")
                return 1
        return 0
    finally:
        cluster.stop_all()
        with contextlib.suppress(FileNotFoundError):
            if json.loads(state.read_text()).get("pid") == os.getpid():
                state.unlink()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _cmd_stop(args: argparse.Namespace) -> int:
    state = Path(args.state_file)
    if not state.is_file():
        print(f"no state file {state}; nothing to stop", file=sys.stderr)
        return 0
    info = json.loads(state.read_text())
    pid = info.get("pid")
    if pid and _pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
    for node in info.get("nodes", []):  # the `start` process was killed hard: clean up after it
        npid = node.get("pid")
        if npid and _pid_alive(npid):
            os.kill(npid, signal.SIGTERM)
            for _ in range(60):
                if not _pid_alive(npid):
                    break
                time.sleep(0.5)
            else:
                os.kill(npid, signal.SIGKILL)
        if node.get("dir"):
            shutil.rmtree(node["dir"], ignore_errors=True)
    state.unlink(missing_ok=True)
    print("stopped", file=sys.stderr)
    return 0


def _cmd_engines(args: argparse.Namespace) -> int:
    if args.isolated:
        print(json.dumps(check_knn_engines_isolated(home=args.home), indent=2))
    elif args.url:
        print(json.dumps(check_knn_engines(args.url, home=args.home), indent=2))
    else:
        with start_nodes(1, home=args.home) as nodes:
            print(json.dumps(check_knn_engines(nodes[0].url, home=args.home), indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", default=None, help=f"distribution cache (default ${HOME_ENV} or {default_home()})")
    parser.add_argument("--state-file", default=str(DEFAULT_STATE_FILE), help="where `start` writes node URLs")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="fetch + install OpenSearch and k-NN (no nodes)").set_defaults(fn=_cmd_fetch)
    p = sub.add_parser("start", help="start N nodes, print URLs, run until Ctrl-C/SIGTERM")
    p.add_argument("--nodes", "-n", type=int, default=1)
    p.add_argument("--heap", default=DEFAULT_HEAP)
    p.set_defaults(fn=_cmd_start)
    sub.add_parser("stop", help="stop nodes started by `start`").set_defaults(fn=_cmd_stop)
    p = sub.add_parser("engines", help="report which k-NN engines work (starts a node unless --url)")
    p.add_argument("--url", default=None, help="check an already running node (native engines are skipped)")
    p.add_argument("--isolated", action="store_true", help="try every engine on its own throwaway node")
    p.set_defaults(fn=_cmd_engines)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (OpenSearchSetupError, OpenSearchStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
