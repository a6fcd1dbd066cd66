"""Hostile and careless input at the socket and the command line (issue 12, part A).

A real ``memory-plugin serve`` for what only a socket shows: a stalled upload,
an idle connection, a request aiohttp refuses before routing; and the
``keys`` command run as a user runs it, several at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import LiveServer, live_server_with_key
from tests.support.polling import eventually
from tests.support.raw_http import raw_exchange, split_response

MEMORY = "/_plugins/_ml/memory"
HISTORIES = "/v2/ai/conversation_histories"


def assert_opensearch_error(body: dict[str, Any], status: int, type_: str, fragment: str) -> None:
    assert body["status"] == status, body
    assert body["error"]["type"] == type_, body
    assert fragment in body["error"]["reason"], body


def assert_telnyx_error(body: dict[str, Any], code: str, fragment: str) -> None:
    (error,) = body["errors"]
    assert error["code"] == code, body
    assert fragment in error["detail"], body


# -- keys on the command line -----------------------------------------------------------------------------


def cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memory_plugin", "keys", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MEMORY_PLUGIN_CONFIG": ""},
    )


@pytest.mark.parametrize(
    "args", [("--org", ""), ("--org", "  "), ("--org", "acme", "--user", ""), ("--org", "acme", "--user", " \t")]
)
def test_keys_create_refuses_empty_names(tmp_path: Path, args):
    done = cli(tmp_path / "data", "create", *args)
    assert done.returncode == 2
    assert "must be a non-empty printable name" in done.stderr
    assert "key_" not in done.stdout
    assert not (tmp_path / "data" / "keys.json").exists()


def test_parallel_keys_create_lose_no_key(tmp_path: Path):
    data_dir = tmp_path / "data"
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memory_plugin",
                "keys",
                "create",
                "--org",
                "acme",
                "--user",
                f"user-{n}",
                "--data-dir",
                str(data_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(12)
    ]
    printed = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        printed.append(next(line.split()[1] for line in out.splitlines() if line.startswith("key_id:")))
    stored = {entry["key_id"]: entry["user_id"] for entry in json.loads((data_dir / "keys.json").read_text())["keys"]}
    assert sorted(stored) == sorted(printed)
    assert sorted(stored.values()) == sorted(f"user-{n}" for n in range(12))
    assert sorted(path.name for path in data_dir.iterdir()) == ["keys.json", "keys.json.lock"]
    assert stat.S_IMODE((data_dir / "keys.json").stat().st_mode) == 0o600


# -- socket-level: a real `memory-plugin serve` ---------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from embedder import ensure_default_model

    env = {
        "MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model()),
        "MEMORY_PLUGIN_HTTP_BODY_READ_TIMEOUT": "1",
        "MEMORY_PLUGIN_HTTP_IDLE_TIMEOUT": "2",
    }
    server = live_server_with_key(tmp_path_factory.mktemp("live") / "data", env=env)
    yield server
    server.kill()


def _post_head(server: LiveServer, path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("path", [MEMORY, HISTORIES])
async def test_stalled_upload_gets_408_and_the_connection_closes(live, path):
    seconds, received = await raw_exchange(live.port, _post_head(live, path, 100_000) + b'{"name": "', timeout=20)
    status, headers, body = split_response(received)
    assert status == 408
    assert headers["connection"] == "close"
    assert seconds < 5, seconds  # the 1 s body timeout, not aiohttp's 10 s lingering nor forever
    if path.startswith("/v2"):
        assert_telnyx_error(body, "request_timeout", "did not arrive within 1 s")
    else:
        assert_opensearch_error(body, 408, "timeout_exception", "did not arrive within 1 s")
    # The server still serves, and stored nothing.
    _, listed = await raw_exchange(
        live.port,
        f"GET {MEMORY} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {live.token}\r\n\r\n".encode(),
    )
    assert split_response(listed)[2] == {"memories": []}


@pytest.mark.parametrize("path", [MEMORY, HISTORIES])
async def test_a_declared_body_over_the_limit_gets_413_at_once_and_the_connection_closes(live, path):
    """Not the 408 of a body that never comes after the whole read timeout (here 1 s; 60 s by default)."""
    seconds, received = await raw_exchange(live.port, _post_head(live, path, 999_999_999) + b"{", timeout=20)
    status, headers, body = split_response(received)
    assert status == 413
    assert headers["connection"] == "close"
    assert seconds < 0.9, seconds  # answered before the 1 s body timeout could fire, and not lingering
    if path.startswith("/v2"):
        assert_telnyx_error(body, "payload_too_large", "larger than 8388608 bytes")
    else:
        assert_opensearch_error(body, 413, "content_too_long_exception", "larger than 8388608 bytes")


async def test_a_client_gone_mid_body_is_logged_as_499_not_as_an_error(live):
    reader, writer = await asyncio.open_connection("127.0.0.1", live.port)
    writer.write(_post_head(live, MEMORY, 100_000) + b'{"name": "')
    await writer.drain()
    await asyncio.sleep(0.3)
    writer.transport.abort()  # a reset: the server's read fails while it waits for the rest
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in live.log_path.read_text().splitlines() if line.startswith("{")]
        requests = [line for line in lines if line.get("message") == "request" and line.get("status") == 499]
        if requests:
            break
        await asyncio.sleep(0.1)
    assert requests, lines[-5:]
    assert not [line for line in lines if line.get("level") == "error"], lines[-5:]


async def test_silent_and_half_sent_connections_are_closed_when_idle(live):
    for opening in (b"", b"GET /_health HTTP/1.1\r\nHost: x\r\n"):
        seconds, received = await raw_exchange(live.port, opening, timeout=20)
        assert received == b""
        assert 1.5 < seconds < 6, seconds  # the 2 s idle timeout


@pytest.mark.parametrize(
    ("request_head", "style", "fragment"),
    [
        (b"GET " + MEMORY.encode() + b"?x=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", "opensearch", "8190"),
        (b"GET " + HISTORIES.encode() + b"?q=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", "telnyx", "8190"),
        (
            b"GET " + MEMORY.encode() + b" HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"y" * 9000 + b"\r\n\r\n",
            "opensearch",
            "8190",
        ),
        (b"GET /v2/ai/conversation_histories/a\xff HTTP/1.1\r\nHost: x\r\n\r\n", "telnyx", "Invalid char in url path"),
        (b"GET " + HISTORIES.encode() + b"?q=\x00 HTTP/1.1\r\nHost: x\r\n\r\n", "telnyx", "Invalid char in url query"),
        (b"GET " + MEMORY.encode() + b"?q=\x00 HTTP/1.1\r\nHost: x\r\n\r\n", "opensearch", "Invalid char in url query"),
    ],
    ids=["long url", "long url /v2", "long header", "raw byte in path /v2", "NUL in query /v2", "NUL in query"],
)
async def test_requests_refused_before_routing_get_the_api_json_error(live, request_head, style, fragment):
    _, received = await raw_exchange(live.port, request_head)
    status, headers, body = split_response(received)
    assert status == 400
    assert headers["content-type"].startswith("application/json")
    assert len(headers["x-request-id"]) == 32, headers
    if style == "telnyx":
        assert_telnyx_error(body, "invalid_parameter", fragment)
    else:
        assert body["status"] == 400 and body["error"]["type"] == "illegal_argument_exception"
        assert fragment in body["error"]["reason"], body
    log = live.log_path.read_text()
    assert "Traceback" not in log


async def test_a_url_just_under_the_limit_still_works(live):
    path = f"{MEMORY}?pretty=" + "a" * (8190 - len(MEMORY) - 30)
    _, received = await raw_exchange(
        live.port,
        f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {live.token}\r\n\r\n".encode(),
    )
    assert split_response(received)[0] == 200


async def test_a_client_that_stops_reading_its_answer_is_closed_after_the_idle_timeout(live):
    """The answer was held in memory for as long as the socket stayed open: 200 such clients of 8 MB answers
    pinned 1.5 GB.  Now a write that makes no progress for the idle timeout (here 2 s) closes the connection."""
    import socket

    from memory_plugin.auth import KeyStore

    _, token = KeyStore(live.data_dir / "keys.json").create("org-1", "reader")

    async def accepted() -> bool:  # once the server has read the keys file again
        head = f"GET {MEMORY} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n"
        return split_response((await raw_exchange(live.port, head.encode()))[1])[0] == 200

    await eventually(accepted, "the new key is accepted")
    big = json.dumps({"name": "big", "additional_info": {"blob": "x" * 3_000_000}}).encode()
    for _ in range(3):
        head = (
            f"POST {MEMORY} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(big)}\r\n\r\n"
        ).encode()
        _, created = await raw_exchange(live.port, head + big)
        assert split_response(created)[0] == 200
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", live.port))
    stalled.sendall(f"GET {MEMORY}?max_results=3 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    await asyncio.sleep(5)  # reading nothing, past the 2 s idle timeout
    stalled.settimeout(20)
    received = b""
    while chunk := stalled.recv(1 << 20):
        received += chunk
    stalled.close()
    head, _, body = received.partition(b"\r\n\r\n")
    declared = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")).split()[1])
    assert 0 < len(body) < declared, (len(body), declared)  # cut short, and closed: recv saw the end
    assert "read no more of its answer in 2 s" in live.log_path.read_text()


@pytest.mark.parametrize("path", [MEMORY, HISTORIES])
async def test_a_body_refused_before_it_is_read_is_not_drained(live, path):
    """Without a key, a 50 MB upload got its 401 and then had its body read and dropped for aiohttp's 10 s of
    lingering; now the connection closes with the answer."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key_0000000000000000.wrong\r\n"
        f"Content-Type: application/json\r\nContent-Length: {50 << 20}\r\n\r\n"
    ).encode()
    seconds, received = await raw_exchange(live.port, head + b'{"name": "' + b"x" * 65536, timeout=20)
    status, headers, _ = split_response(received)
    assert status == 401
    assert headers["connection"] == "close"
    assert seconds < 5, seconds  # closed with the answer, not after lingering 10 s
