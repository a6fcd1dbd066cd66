"""``memory-plugin serve --workers N``: N server processes on one port, and a parent that keeps them running.

Why processes: one aiohttp process uses one core for HTTP.  Why pre-forked, each with
its own listening socket on the one port (``SO_REUSEPORT``), opened by the parent
before the fork: the kernel spreads connections evenly across the sockets, and a
worker's socket outlives the worker, so connections that arrive while it is
restarted wait in its queue for the next one instead of being refused.

Only for a deployment whose every store is on OpenSearch: an embedded store belongs
to one process (``services.embedded_folders``), so N > 1 with one is refused before
anything starts.  API keys: with ``[auth] keys_backend = "file"`` the workers of one host
share the keys file (each re-reads it when it changes); more than one host needs
``keys_backend = "opensearch"``, the one store every host reads.

The parent loads no model and opens no store.  It forks the workers, starts a new
one in the place of one that dies, stops them all on SIGTERM or SIGINT (each
finishes its requests in flight), and gives up, exiting 1, when workers keep dying
before they serve (a bad setting, a cluster that is down).
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import socket
import sys
import time
import traceback
from types import FrameType

from memory_plugin.app import ensure_development_key, run
from memory_plugin.auth_opensearch import open_key_store
from memory_plugin.services import embedded_folders
from memory_plugin.settings import EmbeddedRegion, OpenSearchRegion, Settings

log = logging.getLogger("memory_plugin.workers")

#: Workers that die before they serve, one after another (none served in between): then the parent gives up.
MAX_START_FAILURES = 3
#: Seconds the workers have to finish their requests after SIGTERM (their own drain takes up to 30); then SIGKILL.
STOP_SECONDS = 40.0
BACKLOG = 1024


def embedded_stores(settings: Settings) -> list[str]:
    """What is embedded, in words, for the refusal: empty when every store is on OpenSearch."""
    if not embedded_folders(settings):
        return []
    named = []
    if not isinstance(settings.regions[settings.home_region], OpenSearchRegion):
        named.append(
            f"the home region {settings.home_region}'s memory, agentic memory and models in {settings.data_dir}"
        )
    for name, region in settings.regions.items():
        if isinstance(region, EmbeddedRegion):
            named.append(f"region {name}'s histories in {settings.region_path(name)}")
    return named


def refusal(settings: Settings, workers: int) -> str | None:
    """Why ``--workers`` cannot be ``workers`` with these settings, or None."""
    if workers < 1:
        return f"--workers must be 1 or more, not {workers}"
    embedded = embedded_stores(settings) if workers > 1 else []
    if not embedded:
        return None
    return (
        f"--workers {workers} needs every store on OpenSearch, and these are embedded (an embedded store "
        f"belongs to one process): {'; '.join(embedded)}. Run one worker, or put every region on OpenSearch."
    )


def cores_shared(settings: Settings, workers: int) -> Settings:
    """Each worker's model calls on its share of the cores, where the threads are not set: the runtime's default
    is every core, and two workers' embeddings each taking both cores (beside OpenSearch) made messages
    searchable a fifth slower than one thread each did (``scripts/bench_opensearch.py``, bridge on)."""
    if workers == 1 or settings.embedder.threads is not None:
        return settings
    return settings.replace(embedder={"threads": max(1, len(os.sched_getaffinity(0)) // workers)})


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` sockets listening on one port (the first one's, when ``port`` is 0)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            sock.listen(BACKLOG)
            port = sock.getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGTERM this worker if the parent dies (even by SIGKILL): no orphan keeps the port."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: an orphan then serves until stopped
    if os.getppid() != parent:
        os._exit(0)


class Supervisor:
    def __init__(self, settings: Settings, sockets: list[socket.socket]) -> None:
        self.settings = settings
        self.sockets = sockets
        self.slots: dict[int, int] = {}  # worker pid -> its socket's index
        self.starting: set[int] = set()  # pids that have not served yet
        self.failures = 0
        self.stopping_since: float | None = None
        self.exit_code = 0
        self.ready_read, self.ready_write = os.pipe()

    # -- a worker -------------------------------------------------------------

    def spawn(self, slot: int) -> None:
        parent = os.getpid()
        stops = {signal.SIGTERM, signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # none may reach the parent's handler in the child
        pid = os.fork()
        if pid:
            self.slots[pid] = slot
            self.starting.add(pid)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
            return
        code = 1
        try:
            code = self._work(slot, parent)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _work(self, slot: int, parent: int) -> int:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
        _die_with_parent(parent)
        os.close(self.ready_read)
        for index, sock in enumerate(self.sockets):
            if index != slot:
                sock.close()
        run(self.settings, sock=self.sockets[slot], ready=lambda: os.write(self.ready_write, b"%d\n" % os.getpid()))
        return 0

    # -- the parent -------------------------------------------------------------

    def supervise(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._stop)
        for slot in range(len(self.sockets)):
            self.spawn(slot)
        while self.slots:
            if select.select([self.ready_read], [], [], 0.25)[0]:
                for line in os.read(self.ready_read, 4096).split():
                    self.starting.discard(int(line))
                    self.failures = 0
            while self.slots:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                self._ended(pid, status)
            if self.stopping_since is not None and time.monotonic() - self.stopping_since > STOP_SECONDS:
                for pid in self.slots:
                    os.kill(pid, signal.SIGKILL)
        return self.exit_code

    def _ended(self, pid: int, status: int) -> None:
        slot = self.slots.pop(pid)
        started = pid not in self.starting
        self.starting.discard(pid)
        if self.stopping_since is not None:
            return
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.waitstatus_to_exitcode(status)}"
        if not started:
            self.failures += 1
            if self.failures >= MAX_START_FAILURES:
                _say(f"workers keep ending before they serve ({self.failures} in a row, the last: {how}); stopping")
                self.exit_code = 1
                self._stop(signal.SIGTERM, None)
                return
        _say(f"worker pid {pid} ended ({how}); starting another in its place")
        self.spawn(slot)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping_since is None:
            self.stopping_since = time.monotonic()
            for pid in self.slots:
                os.kill(pid, signal.SIGTERM)


def _say(message: str) -> None:
    print(f"memory-plugin: {message}", file=sys.stderr, flush=True)


def serve_workers(settings: Settings, workers: int) -> int:
    """Serve with ``workers`` processes until SIGTERM or SIGINT; the exit status."""
    refused = refusal(settings, workers)
    if refused is not None:
        _say(refused)
        return 2
    keys = open_key_store(settings)
    ensure_development_key(keys, settings)  # here, once: not once per worker
    sockets = listening_sockets(settings.http.host, settings.http.port, workers)
    port = sockets[0].getsockname()[1]
    shared = (
        f"keys from {keys.where}, shared by this host's workers (more than one host needs keys_backend = 'opensearch' in [auth])"
        if settings.auth.keys_backend == "file"
        else f"keys from {keys.where}"
    )
    _say(f"{workers} workers on http://{settings.http.host}:{port}, parent pid {os.getpid()}; {shared}")
    try:
        return Supervisor(cores_shared(settings, workers), sockets).supervise()
    finally:
        for sock in sockets:
            sock.close()
