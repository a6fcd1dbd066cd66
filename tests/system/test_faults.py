"""Fault injection against real server processes: SIGKILL, a hanging region, a full or
read-only data folder, and SIGTERM with requests in flight.

Every test runs ``memory-plugin serve`` as a subprocess (``tests/live.py``) on a
loopback port.  The disk tests mount a small tmpfs / loop ext4 file system, so
they need root (CAP_SYS_ADMIN); without it they skip and say why.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.live import LiveServer, fault_random, key_headers, unavailable

MEMORY = "/_plugins/_ml/memory/conversation"
HISTORIES = "/v2/ai/conversation_histories"
WORDS = (
    "billing invoice refund router outage customer agent password delivery address upgrade plan charge account "
    "support ticket network signal modem payment contract roaming voicemail technician appointment cancellation "
    "discount balance statement transfer"
).split()


@pytest.fixture(scope="module")
def server_env() -> dict[str, str]:
    """Name the model folder explicitly: the server then skips hashing 500 MB of model files on every start."""
    from embedder import ensure_default_model

    return {"MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model())}


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def long_text(rng: random.Random) -> str:
    """About 1100-1500 tokens of the e5 tokenizer: 3 or 4 chunks of 480 (64 overlap)."""
    return words(rng, rng.randint(1000, 1250)) + "."


def start(data_dir: Path, env: dict[str, str], **kwargs: Any) -> LiveServer:
    return LiveServer(data_dir, env=env, **kwargs).start()


async def search_record(http: aiohttp.ClientSession, record_id: str, record_type: str) -> list[dict[str, Any]]:
    params = {"q": "customer", "record_type": record_type, "top_k": "100", "filter[record_id]": record_id}
    async with http.get(HISTORIES, params=params) as response:
        assert response.status == 200, await response.text()
        hits = (await response.json())["data"]
    assert all(hit["record_id"] == record_id for hit in hits)
    return hits


def chunk_state(hits: list[dict[str, Any]]) -> tuple[int, int]:
    """``(distinct chunk indexes, chunk_total)`` of one record's hits, which must agree on chunk_total."""
    totals = {hit["chunk_total"] for hit in hits}
    assert len(totals) <= 1, f"chunks of two versions side by side: {sorted(totals)}"
    indexes = [hit["chunk_index"] for hit in hits]
    assert len(indexes) == len(set(indexes)), f"duplicate chunks {sorted(indexes)}"
    return len(set(indexes)), (totals.pop() if totals else 0)


# -- 1. SIGKILL at random moments --------------------------------------------------------------


class Ledger:
    """What the server acknowledged (must survive) and what it was asked (may survive, whole)."""

    def __init__(self) -> None:
        self.interactions: dict[str, list[str]] = defaultdict(list)
        self.records: dict[str, int] = {}  # acknowledged record_id -> its chunk_total
        self.record_types: dict[str, str] = {}  # every record id ever sent -> its record_type
        self.unsettled: set[str] = set()  # records with a write sent after their last acknowledgement
        self.long_acks = 0


async def write_stream(
    url: str, headers: dict[str, str], ledger: Ledger, rng: random.Random, tag: str, long_records: bool
) -> None:
    """Memory writes and ingestions, concurrently, until the server goes away.

    Ingestions alternate by round: multi-chunk records (kills land mid-ingestion and
    mid-replacement), or short ones (many acknowledgements before the kill: short
    texts batched with 480-token chunks would be padded to their length and starve).
    """
    connector = aiohttp.TCPConnector(limit=16)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(url, headers=headers, connector=connector, timeout=timeout) as http:

        async def memory_writer(n: int) -> None:
            async with http.post(MEMORY, json={"name": f"kill-{tag}-{n}"}) as response:
                assert response.status == 200, await response.text()
                conversation = (await response.json())["conversation_id"]
            ledger.interactions[conversation]  # acknowledged: must exist even with no interaction
            for i in range(10**6):
                body = {"input": f"q {tag}-{n}-{i}", "response": words(rng, 20), "origin": "fault-test"}
                async with http.post(f"{MEMORY}/{conversation}", json=body) as response:
                    assert response.status == 200, await response.text()
                    ledger.interactions[conversation].append((await response.json())["interaction_id"])
                await asyncio.sleep(0.005)  # leave the embedder some CPU

        async def ingest(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
            for record in records:
                ledger.record_types[record["record_id"]] = record["record_type"]
                ledger.unsettled.add(record["record_id"])
            async with http.post(HISTORIES, json={"records": records}) as response:
                assert response.status == 201, await response.text()
                data = (await response.json())["data"]
            for item in data:
                ledger.records[item["record_id"]] = item["chunk_total"]
                ledger.unsettled.discard(item["record_id"])
            return data

        async def long_writer() -> None:
            """Multi-chunk records; every other one replaces an acknowledged one with a new text."""
            for i in range(10**6):
                acknowledged_long = [r for r, total in ledger.records.items() if total >= 3]
                if i % 2 and acknowledged_long:
                    record_id = rng.choice(acknowledged_long)
                else:
                    record_id = f"long-{tag}-{i}"
                data = await ingest([{"record_id": record_id, "record_type": "voice", "text": long_text(rng)}])
                assert data[0]["chunk_total"] >= 3, data
                ledger.long_acks += 1

        async def short_writer() -> None:
            for i in range(10**6):
                records = [
                    {"record_id": f"short-{tag}-{i}-{j}", "record_type": "message", "text": words(rng, 12)}
                    for j in range(2)
                ]
                await ingest(records)

        async def until_killed(writer: Any) -> None:
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
                await writer

        await asyncio.gather(
            until_killed(memory_writer(0)),
            until_killed(memory_writer(1)),
            until_killed(long_writer() if long_records else short_writer()),
        )


async def check_ledger(url: str, headers: dict[str, str], ledger: Ledger) -> tuple[int, int]:
    """Nothing acknowledged is lost; no record is visible with only some of its chunks."""
    semaphore = asyncio.Semaphore(8)
    incomplete: list[str] = []
    lost: list[str] = []
    async with aiohttp.ClientSession(url, headers=headers) as http:

        async def conversation(conversation_id: str, acknowledged: list[str]) -> None:
            async with semaphore, http.get(f"{MEMORY}/{conversation_id}", params={"max_results": "10000"}) as response:
                if response.status != 200:
                    lost.append(f"conversation {conversation_id}: {response.status}")
                    return
                stored = {i["interaction_id"] for i in (await response.json())["interactions"]}
            lost.extend(f"interaction {i}" for i in acknowledged if i not in stored)

        async def record(record_id: str, record_type: str) -> None:
            async with semaphore:
                hits = await search_record(http, record_id, record_type)
            distinct, total = chunk_state(hits)
            if distinct != total:
                incomplete.append(f"{record_id}: {distinct} of {total} chunks")
            if record_id in ledger.records:
                if not hits:
                    lost.append(f"record {record_id}")
                elif record_id not in ledger.unsettled and total != ledger.records[record_id]:
                    lost.append(f"record {record_id}: {total} chunks, acknowledged {ledger.records[record_id]}")

        await asyncio.gather(
            *(conversation(c, ids) for c, ids in list(ledger.interactions.items())),
            *(record(r, t) for r, t in list(ledger.record_types.items())),
        )
    assert not lost, f"acknowledged writes lost: {lost[:20]}"
    assert not incomplete, f"half-written records visible: {incomplete[:20]}"
    return sum(map(len, ledger.interactions.values())), len(ledger.records)


@pytest.mark.timeout(900)
async def test_sigkill_at_random_moments_loses_nothing_acknowledged_and_shows_nothing_half_written(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    rounds = int(os.environ.get("FAULT_KILL_ROUNDS", "20"))
    rng = fault_random()
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
    ledger = Ledger()
    history: list[tuple[float, int, int]] = []
    server = start(data_dir, server_env)
    try:
        # A few acknowledged multi-chunk records up front, so that replacements of
        # acknowledged records are in the stream from the first round on.
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            records = [{"record_id": f"seed-{n}", "record_type": "voice", "text": long_text(rng)} for n in range(2)]
            async with http.post(HISTORIES, json={"records": records}) as response:
                assert response.status == 201, await response.text()
                for item in (await response.json())["data"]:
                    assert item["chunk_total"] >= 3
                    ledger.records[item["record_id"]] = item["chunk_total"]
                    ledger.record_types[item["record_id"]] = "voice"
        for n in range(rounds):
            if n:
                server = start(data_dir, server_env)
                history.append((0.0, *await check_ledger(server.url, headers, ledger)))
            delay = rng.uniform(0.2, 2.0)
            stream = asyncio.create_task(
                write_stream(server.url, headers, ledger, rng, f"{n}", long_records=n % 2 == 0)
            )
            await asyncio.sleep(delay)
            server.kill()  # SIGKILL, at a random moment of the stream
            await stream
        server = start(data_dir, server_env)
        interactions, records = await check_ledger(server.url, headers, ledger)
    finally:
        server.kill()
    print(
        f"{rounds} kills; acknowledged {interactions} interactions, {records} records "
        f"({ledger.long_acks} multi-chunk ingestions acknowledged, {len(ledger.unsettled)} never acknowledged)"
    )
    assert interactions > 0 and records > 2


# -- 2. A region that accepts connections and never answers --------------------------------------


@contextlib.contextmanager
def hanging_listener() -> Iterator[int]:
    """A TCP port that accepts connections, reads nothing and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        listener.close()


@pytest.mark.timeout(180)
async def test_a_hanging_region_is_reported_in_failed_regions_within_the_deadline(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    pytest.importorskip("memory_plugin.histories.stores.opensearch", reason="the OpenSearch store does not exist yet")
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir, "org-1", None)
    deadline = 1.0
    # The USA data first, with every region embedded: an ingestion also clears the
    # record id in every other region, which a hanging region cannot confirm.
    with LiveServer(data_dir, env=server_env) as server:
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            record = {
                "record_id": "usa-1",
                "record_type": "voice",
                "region": "USA",
                "text": "The customer called about a billing discrepancy on the invoice.",
            }
            async with http.post(HISTORIES, json={"records": [record]}) as response:
                assert response.status == 201, await response.text()
    with hanging_listener() as port:
        config = tmp_path / "regions.toml"
        config.write_text(
            f'home_region = "USA"\nsearch_deadline = {deadline}\n\n'
            '[regions.USA]\nstore = "embedded"\n\n'
            f'[regions.DEU]\nstore = "opensearch"\nhosts = ["http://127.0.0.1:{port}"]\ntimeout = 5.0\n'
        )
        server = LiveServer(data_dir, env=server_env, config=config).start()
        try:
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                params = {"q": "billing issue", "record_type": "voice"}
                async with http.get(HISTORIES, params={**params, "q": "warm up"}):
                    pass  # the first query embedding
                started = time.perf_counter()
                async with http.get(HISTORIES, params=params) as response:
                    body = await response.json()
                    elapsed = time.perf_counter() - started
                assert response.status == 200, body
                assert elapsed < deadline + 1.5, f"search took {elapsed:.2f}s with a {deadline}s deadline"
                assert body["meta"]["failed_regions"] == ["DEU"]
                assert [hit["record_id"] for hit in body["data"]] == ["usa-1"]

                # Asking only the hanging region: nobody answered, a 503 in the Telnyx format.
                started = time.perf_counter()
                async with http.get(HISTORIES, params={**params, "region": "DEU"}) as response:
                    body = await response.json()
                    elapsed = time.perf_counter() - started
                assert response.status == 503, body
                assert body["errors"][0]["code"] == "service_unavailable"
                assert elapsed < deadline + 1.5
            assert server.process is not None and server.process.poll() is None
        finally:
            server.kill()


# -- 3. A full or read-only data folder ------------------------------------------------------------


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True)


@contextlib.contextmanager
def mounted(target: Path, *mount_args: str) -> Iterator[Path]:
    target.mkdir(parents=True, exist_ok=True)
    done = _run("mount", *mount_args, str(target))
    if done.returncode != 0:
        unavailable(f"cannot mount ({' '.join(mount_args)}) here: {done.stderr.strip()} (needs root / CAP_SYS_ADMIN)")
    try:
        yield target
    finally:
        _run("umount", "-l", str(target))


def fill(folder: Path) -> Path:
    """Write a file until the file system says ENOSPC.

    Unbuffered: a buffered file keeps the bytes a short write left over and raises
    ENOSPC again from ``close()``, depending only on how the free space is aligned.
    """
    filler = folder / "filler.bin"
    with open(filler, "wb", buffering=0) as handle:
        for size in (1 << 16, 1 << 12, 1):  # then the last partial blocks
            block = b"\0" * size
            try:
                while True:
                    handle.write(block)
            except OSError as error:
                assert error.errno == errno.ENOSPC, error
    return filler


class Writes:
    """Acknowledged writes against one server, read back at the end."""

    def __init__(self, http: aiohttp.ClientSession) -> None:
        self.http = http
        self.conversation = ""
        self.interactions: list[str] = []
        self.records: list[str] = []
        self.n = 0

    @classmethod
    async def acknowledged(cls, http: aiohttp.ClientSession, name: str, interactions: int) -> Writes:
        """A conversation with ``interactions`` interactions and one ingest batch, each acknowledged."""
        writes = cls(http)
        async with http.post(MEMORY, json={"name": name}) as response:
            writes.conversation = (await response.json())["conversation_id"]
        for _ in range(interactions):
            assert (await writes.interaction())[0] == 200
        assert (await writes.ingest())[0] == 201
        return writes

    async def interaction(self, size: int = 40) -> tuple[int, Any]:
        self.n += 1
        body = {"input": f"question {self.n}", "response": "x" * size}
        async with self.http.post(f"{MEMORY}/{self.conversation}", json=body) as response:
            payload = await body_of(response)
            if response.status == 200:
                self.interactions.append(payload["interaction_id"])
            return response.status, payload

    async def ingest(self, count: int = 2) -> tuple[int, Any]:
        self.n += 1
        records = [
            {
                "record_id": f"disk-{self.n}-{j}",
                "record_type": "voice",
                "text": f"Call {self.n}.{j}: the customer asked about a refund for order {self.n * 100 + j}.",
            }
            for j in range(count)
        ]
        async with self.http.post(HISTORIES, json={"records": records}) as response:
            payload = await body_of(response)
            if response.status == 201:
                self.records += [item["record_id"] for item in payload["data"]]
            return response.status, payload

    async def check_intact(self) -> None:
        async with self.http.get(f"{MEMORY}/{self.conversation}", params={"max_results": "10000"}) as response:
            assert response.status == 200
            stored = {i["interaction_id"] for i in (await response.json())["interactions"]}
        assert set(self.interactions) <= stored, set(self.interactions) - stored
        for record_id in self.records:
            assert await search_record(self.http, record_id, "voice"), f"record {record_id} lost"


def assert_storage_error(status: int, body: Any, v2: bool, allowed: tuple[int, ...]) -> None:
    assert status in allowed, (status, body)
    assert isinstance(body, dict), body
    if v2:
        assert body["errors"][0]["code"] in {"insufficient_storage", "service_unavailable"}, body
        assert body["errors"][0]["detail"], body
    else:
        assert body["status"] == status, body
        assert body["error"]["type"] in {"insufficient_storage_exception", "status_exception"}, body
        assert body["error"]["root_cause"][0]["reason"], body


async def body_of(response: aiohttp.ClientResponse) -> Any:
    text = await response.text()
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON: the assertions on the body will show it


async def until_refused(write: Any, attempts: int = 40) -> tuple[int, Any]:
    """A full disk may still take a write or two into space SQLite already holds: retry until refused."""
    for _ in range(attempts):
        status, body = await write()
        if status not in (200, 201):
            return status, body
    raise AssertionError(f"{attempts} writes accepted on a full disk")


@pytest.mark.timeout(300)
async def test_full_data_folder_gives_507_keeps_serving_and_recovers(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    with mounted(tmp_path / "data", "-t", "tmpfs", "-o", "size=48m", "tmpfs") as data_dir:
        headers = key_headers(data_dir)
        server = start(data_dir, server_env)
        try:
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                writes = await Writes.acknowledged(http, "disk", 5)

                filler = fill(data_dir)
                status, body = await until_refused(writes.interaction)
                assert_storage_error(status, body, v2=False, allowed=(507,))
                # One write larger than SQLite's page cache: the disk fills in the middle
                # of the transaction, not at COMMIT.
                status, body = await writes.interaction(size=3_000_000)
                assert_storage_error(status, body, v2=False, allowed=(507,))
                status, body = await until_refused(writes.ingest)
                assert_storage_error(status, body, v2=True, allowed=(507,))
                # Reads still work, the process is alive.
                async with http.get(f"{MEMORY}/{writes.conversation}") as response:
                    assert response.status == 200
                assert await search_record(http, writes.records[0], "voice")
                assert server.process is not None and server.process.poll() is None

                filler.unlink()  # space returns
                assert (await writes.interaction())[0] == 200
                assert (await writes.interaction(size=3_000_000))[0] == 200
                assert (await writes.ingest())[0] == 201
                await writes.check_intact()

                # SIGTERM while the disk is full again: the index snapshot cannot be
                # written, but SQLite holds everything; the shutdown must still be clean.
                filler = fill(data_dir)
                code = server.terminate(timeout=60)
                log = server.log_path.read_text(errors="replace")
                assert code == 0, log[-3000:]
                filler.unlink()
            server = start(data_dir, server_env)
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                writes.http = http
                await writes.check_intact()
                assert (await writes.interaction())[0] == 200
                assert (await writes.ingest())[0] == 201
        finally:
            server.kill()


def _immutable(paths: list[Path], on: bool) -> None:
    for path in paths:
        done = _run("chattr", "+i" if on else "-i", str(path))
        if done.returncode != 0:
            raise RuntimeError(f"chattr on {path}: {done.stderr}")


@pytest.mark.timeout(300)
async def test_read_only_data_folder_gives_a_clear_error_keeps_serving_and_recovers(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    """Read-only while running: the database files become immutable (``chattr +i``).

    A running server holds its files open, so neither ``mount -o remount,ro`` nor a
    read-only bind remount is allowed (EBUSY); an immutable flag is what makes
    writes through the open descriptors fail (EPERM).  The ``-shm`` files stay
    writable: SQLite maps them into memory, and a refused page fault there is a
    SIGBUS, not an error SQLite could report.
    """
    if shutil.which("mkfs.ext4") is None or shutil.which("chattr") is None:
        unavailable("needs mkfs.ext4 and chattr")
    image = tmp_path / "fs.img"
    with open(image, "wb") as handle:
        handle.truncate(96 << 20)
    made = _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
    if made.returncode != 0:
        unavailable(f"mkfs.ext4 failed: {made.stderr}")
    with mounted(tmp_path / "data", "-o", "loop", str(image)) as data_dir:
        headers = key_headers(data_dir)
        server = start(data_dir, server_env)
        frozen: list[Path] = []
        try:
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                writes = await Writes.acknowledged(http, "read-only", 3)

                frozen = [p for p in data_dir.rglob("*") if p.suffix == ".sqlite3" or p.name.endswith("-wal")]
                frozen += [p for p in data_dir.rglob("*") if p.is_dir() and p.name != "lost+found"] + [data_dir]
                _immutable(frozen, True)
                # 503 is the status for a read-only folder; SQLite reports a refused
                # write() as SQLITE_IOERR ("disk I/O error"), which the server maps to 507.
                status, body = await writes.interaction()
                assert_storage_error(status, body, v2=False, allowed=(503, 507))
                status, body = await writes.ingest()
                assert_storage_error(status, body, v2=True, allowed=(503, 507))
                async with http.post(MEMORY, json={"name": "refused"}) as response:
                    assert_storage_error(response.status, await body_of(response), v2=False, allowed=(503, 507))
                async with http.get(f"{MEMORY}/{writes.conversation}") as response:
                    assert response.status == 200
                assert await search_record(http, writes.records[0], "voice")
                assert server.process is not None and server.process.poll() is None

                _immutable(frozen, False)
                frozen = []
                assert (await writes.interaction())[0] == 200
                assert (await writes.ingest())[0] == 201
                await writes.check_intact()
        finally:
            if frozen:
                _immutable(frozen, False)
            server.kill()
        server = start(data_dir, server_env)  # and after a crash, all of it is still there
        try:
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                writes.http = http
                await writes.check_intact()
        finally:
            server.kill()


# -- 4. SIGTERM with requests in flight ---------------------------------------------------------------


def refuses_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True


@pytest.mark.timeout(300)
async def test_sigterm_finishes_in_flight_requests_refuses_new_connections_and_exits_0(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    rng = random.Random(7)
    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
    server = start(data_dir, server_env)
    try:
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            async with http.post(MEMORY, json={"name": "term"}) as response:
                conversation = (await response.json())["conversation_id"]
            # Warm the model so that the batches below take a predictable while.
            async with http.post(HISTORIES, json={"records": [{"record_type": "voice", "text": "warm up"}]}) as r:
                assert r.status == 201

            async def slow_ingest(batch: int) -> tuple[int, Any, float]:
                # About 24 chunks of 480 tokens a batch: several seconds of embedding even on an idle machine.
                records = [
                    {"record_id": f"term-{batch}-{n}", "record_type": "voice", "text": words(rng, 1200)}
                    for n in range(6)
                ]
                async with http.post(HISTORIES, json={"records": records}) as response:
                    return response.status, await response.json(), time.monotonic()

            in_flight = [asyncio.create_task(slow_ingest(batch)) for batch in range(2)]
            await asyncio.sleep(1.0)
            assert not any(task.done() for task in in_flight), "the ingestions finished before SIGTERM"
            assert server.process is not None
            server.process.send_signal(signal.SIGTERM)
            terminated = time.monotonic()

            # The listening socket closes first: new connections are refused at once.
            refused_at = None
            while time.monotonic() - terminated < 5:
                if refuses_connections(server.port):
                    refused_at = time.monotonic()
                    break
                await asyncio.sleep(0.05)
            assert refused_at is not None, "new connections still accepted 5 s after SIGTERM"
            async with aiohttp.ClientSession(
                server.url, headers=headers, connector=aiohttp.TCPConnector(force_close=True)
            ) as fresh:
                with pytest.raises(aiohttp.ClientConnectionError):
                    async with fresh.get(f"{MEMORY}/{conversation}"):
                        pass

            results = await asyncio.gather(*in_flight)
        for batch, (status, body, finished) in enumerate(results):
            assert status == 201, body
            assert [item["record_id"] for item in body["data"]] == [f"term-{batch}-{n}" for n in range(6)]
            assert finished > terminated
        assert refused_at < max(finished for _, _, finished in results), "refusal should come before the drain ends"
        assert server.process.wait(60) == 0, server.log_path.read_text(errors="replace")[-3000:]

        server = start(data_dir, server_env)  # what was acknowledged during the shutdown is stored
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            for batch in range(2):
                for n in range(6):
                    assert await search_record(http, f"term-{batch}-{n}", "voice")
    finally:
        server.kill()
