"""scripts/bench_memory_search.py and bench_scaleout.py at tiny sizes against the session's real node (tests/system/test_benchmarks.py runs the others)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.live import run_script
from tests.system.test_benchmarks import PNG

pytestmark = pytest.mark.opensearch


@pytest.mark.timeout(180)
def test_memory_search_benchmark_runs_and_writes_its_json_and_chart(opensearch_nodes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "opensearch_memory_search.json"
    args = ["--conversations", "20", "--messages", "20", "--repeat", "2", "--opensearch-url", opensearch_nodes[0].url]
    done = run_script("bench_memory_search.py", *args, "--out", str(out), timeout=170)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert {(row["index"], row["body"]) for row in report["results"]} == {
        ("memories", "match name"),
        ("memories", "term + sort"),
        ("memories", "match_all page"),
        ("messages", "match response"),
        ("messages", "exists + sort"),
    }
    assert out.with_suffix(".png").read_bytes().startswith(PNG)


@pytest.mark.timeout(300)
def test_scaleout_benchmark_runs_one_and_two_workers(opensearch_nodes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "scaleout.json"
    args = ["--requests", "40", "--concurrency", "4", "--records", "20", "--workers", "1,2"]
    args += [arg for node in opensearch_nodes for arg in ("--opensearch-url", node.url)]
    done = run_script("bench_scaleout.py", *args, "--out", str(out), timeout=290)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    cases = ("create message", "list messages", "history search")
    assert {(row["case"], row["workers"]) for row in report["results"]} == {(c, n) for c in cases for n in (1, 2)}
    for row in report["results"]:
        assert row["statuses"] == {"200": 40}, row  # every call answered, on either worker
        assert row["server_cpu_ms_per_request"] > 0, row
    assert out.with_suffix(".png").read_bytes().startswith(PNG)


@pytest.mark.timeout(300)
def test_side_by_side_benchmark_counts_what_each_operation_costs_the_node(opensearch_nodes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without ml-commons on the session's node: this server's rows only, each with the node's counts; with the
    bridge on, a create case lasts until its messages are searchable, and costs the embedding besides."""
    out = tmp_path / "opensearch.json"
    args = ["--requests", "40", "--warmup", "8", "--rounds", "1", "--concurrency", "4", "--workers", "1"]
    args += ["--no-ml-commons"]
    done = run_script(
        "bench_opensearch.py", *args, "--opensearch-url", opensearch_nodes[0].url, "--out", str(out), timeout=290
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["warmup"] == 8
    rows = {(row["target"], row["op"], row["memories"]): row for row in report["results"]}
    assert report["rounds"] == 1 and report["earlier_rounds"] == []
    assert set(rows) == {
        (f"ours, bridge {bridge}, 1w", op, memories)
        for bridge in ("off", "on")
        for op in ("create", "list")
        for memories in (1, 32)
    }
    for (target, op, memories), row in rows.items():
        assert row["statuses"] == {"200": 40}, row
        assert row["server_cpu_ms_per_op"] > 0, row
        if op == "create":  # every message is indexed, and refreshed before it is acknowledged
            assert row["indexed_per_op"] >= 1 and row["refreshes_per_op"] > 0, row
        if target.endswith("off, 1w") or op == "list":
            assert row["searchable_req_per_s"] == row["req_per_s"], row
        else:  # the bridge's records, embedded on the server's CPU, and the wait for them
            plain = rows["ours, bridge off, 1w", op, memories]
            assert row["indexed_per_op"] > plain["indexed_per_op"], (row, plain)
            assert row["server_cpu_ms_per_op"] > plain["server_cpu_ms_per_op"], (row, plain)
            assert row["searchable_req_per_s"] <= row["req_per_s"], row
    assert out.with_suffix(".png").read_bytes().startswith(PNG)
