"""scripts/loadtest.py end to end: a short run against a server of its own, as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.live import run_script


@pytest.mark.timeout(240)
def test_short_spawned_load_run_loses_nothing_and_has_no_5xx(tmp_path: Path) -> None:
    out = tmp_path / "loadtest.json"
    done = run_script("loadtest.py", "--spawn", "--duration", "8", "--concurrency", "8", "--out", str(out), timeout=220)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["ok"] is True
    assert result["server_5xx"] == 0
    assert result["verification"]["lost_writes"] == 0
    assert result["verification"]["verify_error_count"] == 0
    assert set(result["operations"]) == {
        "create_interaction",
        "list_interactions",
        "ingest",
        "search",
        "create_conversation",
    }
    for op, stats in result["operations"].items():
        assert stats["count"] > 0 and stats["throughput_rps"] > 0, (op, stats)
        assert stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"], (op, stats)
    checked = result["verification"]["checked"]
    assert checked["interactions"] > 0 and checked["records"] > 0 and checked["conversations"] > 0
    assert "lost writes: 0" in done.stdout
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_refuses_a_non_loopback_url(tmp_path: Path) -> None:
    done = run_script(
        "loadtest.py", "--url", "http://10.1.2.3:9200", "--keys", "k", "--duration", "1", "--out", str(tmp_path / "x.json"),
        timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "only loopback" in done.stderr
    assert not (tmp_path / "x.json").exists()
