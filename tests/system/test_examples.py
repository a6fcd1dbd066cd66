"""Both examples run as a user would run them, and print what they found."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
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
