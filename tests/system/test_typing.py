"""The public API passes ``mypy --strict``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_public_api_passes_mypy_strict():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "memory_plugin/__init__.py",
            "memory_plugin/api",
            "examples/asyncio_memory.py",
            "examples/agentic_memory.py",
            "tests/system/typed_api_usage.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success" in done.stdout
