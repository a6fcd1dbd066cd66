"""The README's five-minute tour, run as written by bash against a live server with the real model.

The tour block is extracted from README.md (after ``<!-- tour -->``) and run with ``bash -euo pipefail``
from a folder whose ``.venv/bin/memory-plugin`` is this interpreter's, as a user runs it from the
repository root after ``make run``: it creates its own key with the CLI, and every ``curl -f`` turns an
HTTP error into a failure.  The answers it prints are then checked, so a tour that "runs" but shows
nothing useful fails too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.docs import tour
from tests.support.live import LiveServer, unavailable


def answers(stdout: str) -> list[dict[str, Any]]:
    """Each line the tour printed, as the JSON object it must be."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def hits(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return list(answer.get("hits", {}).get("hits", []))


def test_the_readme_tour_runs_against_a_live_server(tmp_path: Path) -> None:
    for tool in ("bash", "curl", "sed"):
        if shutil.which(tool) is None:
            unavailable(f"the README's tour needs {tool}")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    # The repository root as the tour expects it: .venv/bin/memory-plugin is the CLI.
    checkout = tmp_path / "checkout"
    cli = checkout / ".venv" / "bin" / "memory-plugin"
    cli.parent.mkdir(parents=True)
    cli.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memory_plugin "$@"\n')
    cli.chmod(0o755)
    # As `make run` serves: the defaults, the memory bridge on.
    with LiveServer(data_dir, env={"MEMORY_PLUGIN_BRIDGE_ENABLED": "true"}) as server:
        env = {key: value for key, value in os.environ.items() if key not in ("KEY", "MP")}
        env |= {"MP": server.url, "MEMORY_PLUGIN_DATA_DIR": str(data_dir)}
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", tour()],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, f"the tour failed ({done.returncode}):\n{done.stderr[-3000:]}\n{done.stdout[-3000:]}"
    printed = answers(done.stdout)
    assert not done.stderr.strip(), done.stderr

    # The 2.12 message is found by _search on its memory.
    messages = [hit["_source"] for answer in printed for hit in hits(answer) if "input" in hit["_source"]]
    assert [m["input"] for m in messages] == ["Why was I charged twice?"]
    # The history record is found by meaning: "invoice problem" for a billing discrepancy.
    found = [row for answer in printed for row in answer.get("data", []) if "score" in row]
    assert [row["record_id"] for row in found] == ["rec-001"]
    assert found[0]["user_id"] == "alice" and found[0]["organization_id"] == "acme"
    # The agentic memory added to the container is found again, under its namespace.
    working = [hit["_source"] for answer in printed for hit in hits(answer) if "messages" in hit["_source"]]
    assert len(working) == 1 and working[0]["namespace"] == {"user_id": "bob"}
    assert "router" in working[0]["messages"][0]["content"][0]["text"]
    # And the health check, last.
    assert printed[-1]["status"] == "green"
