"""Every benchmark's chart draws from a small saved result, so plots cannot break unnoticed."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SEARCH_CELL = {"candidates": 1000, "p50_ms": 0.8, "p99_ms": 1.9, "recall_at_10": 0.97}
RESULTS: dict[str, dict[str, Any]] = {
    "search": {
        "sizes": {
            "1000": {
                "mean_pairwise_cosine": 0.8,
                "load_average_before": 1.0,
                "load_average_after": 1.2,
                "embedded": {
                    "load_s": 0.1,
                    "unfiltered": SEARCH_CELL,
                    "filter 1%": SEARCH_CELL,
                    "filter 30%": SEARCH_CELL,
                },
                "opensearch-lucene": {"unfiltered": {**SEARCH_CELL, "p50_ms": 4.0, "recall_at_10": 0.91}},
                "exact (numpy)": {"unfiltered": {"p50_ms": 0.2, "p99_ms": 0.3, "recall_at_10": 1.0}},
            }
        }
    },
    "bridge": {
        "requests": 100,
        "concurrency": 32,
        "results": [
            {"system": "ours", "req_per_s": 700.0, "last_searchable_after_s": 3.0},
            {"system": "ml-commons", "req_per_s": 200.0, "last_searchable_after_s": None},
        ],
    },
    "memory": {
        "bridge": False,
        "results": [
            {"case": case, "concurrency": c, "req_per_s": 100.0 * c, "p50_ms": 1.0, "p99_ms": 2.0}
            for case in ("hello-world GET", "create interaction")
            for c in (1, 8, 32)
        ],
    },
    "http": {
        "records": 10,
        "chunks": 40,
        "ingest": {"raw_embedder_chunks_per_s": 50.0, "http_chunks_per_s": 40.0, "fraction_of_raw": 0.8},
        "search": [
            {"case": f"search c={c}", "concurrency": c, "req_per_s": 20.0 * c, "p50_ms": 9.0, "p99_ms": 30.0}
            for c in (1, 4, 16)
        ],
    },
    "embedder": {
        "results": [
            {"engine": engine, "workload": work, "batch": b, "items_per_s": 10.0 * b}
            for engine in ("ours fp32", "ours int8")
            for work in ("short", "passage480")
            for b in (1, 8, 32)
        ]
    },
    "loadtest": {
        "concurrency": 8,
        "throughput_rps": 120.0,
        "operations": {
            op: {"count": 10, "throughput_rps": 12.0, "p50_ms": 3.0, "p90_ms": 6.0, "p99_ms": 12.0, "max_ms": 20.0}
            for op in ("create_interaction", "search")
        },
    },
    "stall": {
        "source": "this checkout",
        "memories": 10,
        "searchers": 2,
        "health_idle_ms": [0.8, 1.0, 1.2, 6.0],
        "health_during_searches_ms": [2.0, 4.0, 9.0, 40.0],
    },
}


@pytest.fixture(scope="module")
def plot_file() -> Any:
    """Imported by the worker that draws (matplotlib takes a second to import), not by every one that collects."""
    sys.path.insert(0, str(SCRIPTS))
    from _plots import plot_file

    return plot_file


@pytest.mark.xdist_group("charts")
@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_chart_is_a_png_beside_the_json(kind: str, tmp_path: Path, plot_file: Any) -> None:
    saved = tmp_path / f"{kind}.json"
    saved.write_text(json.dumps(RESULTS[kind]))
    png = plot_file(saved)
    assert png == tmp_path / f"{kind}.png"
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR" and data.endswith(b"IEND\xaeB`\x82")
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 600 and height >= 400
