"""The smallest aiohttp server: the baseline our own overhead is measured against.

    python scripts/hello_world.py PORT [--uvloop]

As ``web.run_app`` starts it, on asyncio's own loop; ``--uvloop`` runs it on
uvloop, the loop ``memory-plugin serve`` uses, for a like-for-like comparison.
``hello_world_rps`` starts one and measures it with the load test's client.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from typing import Any

import aiohttp
import uvloop
from aiohttp import web


async def hello(request: web.Request) -> web.Response:
    return web.json_response({"hello": "world"})


async def echo(request: web.Request) -> web.Response:
    return web.json_response({"id": "x" * 20, "size": len(await request.read())})


async def hello_world_rps(concurrency: int, seconds: float) -> dict[str, Any]:
    """Req/s of the smallest aiohttp app, same client and concurrency: the ceiling for this machine."""
    from tests.support.live import free_port

    port = free_port()
    process = subprocess.Popen([sys.executable, __file__, str(port)])
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(url, timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        count, statuses = 0, Counter[int]()
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as http:
            started = time.perf_counter()
            deadline = started + seconds

            async def worker() -> None:
                nonlocal count
                while time.perf_counter() < deadline:
                    async with http.get(url) as response:
                        await response.read()
                        statuses[response.status] += 1
                        count += 1

            await asyncio.gather(*(worker() for _ in range(concurrency)))
            elapsed = time.perf_counter() - started
        return {
            "seconds": round(elapsed, 2),
            "requests": count,
            "throughput_rps": round(count / elapsed, 1),
            "statuses": dict(statuses),
        }
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


app = web.Application()
app.router.add_get("/", hello)
app.router.add_post("/", echo)

if __name__ == "__main__":
    loop = uvloop.new_event_loop() if "--uvloop" in sys.argv[2:] else None
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None, loop=loop)
