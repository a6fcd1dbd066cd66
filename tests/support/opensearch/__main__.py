"""``python -m tests.support.opensearch fetch|start|stop|engines``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.opensearch.distribution import (
    DEFAULT_HEAP,
    DEFAULT_STATE_FILE,
    HOME_ENV,
    OpenSearchSetupError,
    OpenSearchStartError,
    default_home,
    ensure_distribution,
    log,
)
from tests.support.opensearch.engines import check_knn_engines, check_knn_engines_isolated
from tests.support.opensearch.ml import ensure_ml_distribution
from tests.support.opensearch.nodes import OpenSearchCluster, start_nodes

# --------------------------------------------------------------------------- CLI


def _cmd_fetch(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    home = ensure_distribution(args.home)
    print(f"{home}  ({time.monotonic() - t0:.1f}s)")
    if not args.home:  # the ml-commons node, the judge of the conformance suite, sits beside the default home
        print(f"{ensure_ml_distribution()}  ({time.monotonic() - t0:.1f}s)")
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
                    log(
                        f"node {n.name} ({n.url}) exited with code {n.process.returncode if n.process else None}:"
                        f"\n{n.log_tail(20)}"
                    )
            if len(reported) == len(nodes):
                log("all nodes have exited")
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
