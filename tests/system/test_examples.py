"""The examples run as a user would run them, and print what they found."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiohttp import web

from tests.support.agentic_llm import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_asyncio_example_stores_and_finds_the_conversation(tmp_path):
    out = run("examples/asyncio_memory.py", str(tmp_path))
    assert "has 2 interactions" in out
    first_hit = [line for line in out.splitlines() if line.startswith("found")][0]
    assert "internet drops every evening" in first_hit


def test_mounted_example_serves_host_and_plugin_routes():
    out = run("examples/mounted_app.py", "--check")
    assert "host route: {'service': 'call-center backend', 'ok': True}" in out
    assert "has 1 message(s)" in out
    assert "Can I pay by invoice?" in out.split("search found:")[1]


@contextmanager
def scripted_llm(facts: list[str]) -> Iterator[str]:
    """The scripted chat-completions server, in a thread of its own (the example is another process): its URL."""
    llm = ScriptedLLM()
    llm.facts = lambda kind, messages: facts
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(llm.app())

    async def start() -> str:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/v1/chat/completions"

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def test_agentic_example_remembers_finds_and_forgets(tmp_path):
    with scripted_llm(["Alice moved to Lisbon", "Alice is allergic to peanuts"]) as url:
        out = run("examples/agentic_memory.py", str(tmp_path), env={"MEMORY_PLUGIN_AGENTIC_LLM_URL": url})
    remembered = [line for line in out.splitlines() if line.startswith("remembered")]
    assert len(remembered) == 2 and remembered[0].endswith("Alice is allergic to peanuts"), out
    assert "forgot 2 facts with the conversation" in out
    assert "has 1 message(s)" in out and "embedded 2 texts into 384 dimensions" in out


def test_agentic_example_without_an_llm_still_runs_the_rest(tmp_path):
    out = run("examples/agentic_memory.py", str(tmp_path), env={"MEMORY_PLUGIN_AGENTIC_LLM_URL": ""})
    assert "skipping inferred memories" in out and "has 1 message(s)" in out
