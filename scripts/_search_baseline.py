"""``bench_search.py --baseline``: the loaded store searched by an older revision's code and by this tree's, in turns.

Each side runs in its own process (``_search_worker.py``), one search each in turns (the order alternating per
query), so that the two see the same data and the same machine load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _revisions import archived
from tqdm import tqdm

from memory_plugin.app import GIL_SWITCH_INTERVAL

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "_search_worker.py"


def compare_revisions(
    store: Path,
    queries: np.ndarray,
    revision: str,
    cases: dict[str, list[tuple[str, str]]],
    truth: dict[str, list[set[str]]],
    modes: list[tuple[str, str]],
    texts: list[str],
) -> dict[str, Any]:
    """The same store searched by the code of ``revision`` and by this tree, one search each in turns: each case's
    filter ``params`` (``truth``: its exact top 10 per query), and each ``(case, mode)`` with the query ``texts``."""
    with archived(revision, "memory_plugin") as checkout:
        np.save(Path(checkout) / "queries.npy", queries)
        sides = {f"embedded@{revision}": str(checkout), "embedded@this tree": str(ROOT)}
        workers = {
            name: subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    str(store),
                    str(Path(checkout) / "queries.npy"),
                    json.dumps(cases),
                    str(GIL_SWITCH_INTERVAL),
                ],
                env={**os.environ, "PYTHONPATH": code},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for name, code in sides.items()
        }

        def ask(name: str, request: dict[str, Any] | None) -> dict[str, Any]:
            worker = workers[name]
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write((json.dumps(request) if request else "") + "\n")
            worker.stdin.flush()
            answer: dict[str, Any] = json.loads(worker.stdout.readline())
            return answer

        try:
            for name, code in sides.items():
                stdout = workers[name].stdout
                assert stdout is not None
                ready = json.loads(stdout.readline())
                assert ready["code"].startswith(code), (name, ready)  # each side runs the code it names
                assert set(ready["load_report"].values()) == {"snapshot"}, ready
            for case in cases:  # warm caches, off the record
                for name in workers:
                    ask(name, {"case": case, "query": 0})
            samples: dict[str, dict[str, list[dict[str, Any]]]] = {
                name: {case: [] for case in cases} for name in workers
            }
            load_before, order = os.getloadavg()[0], list(workers)
            for number in tqdm(range(len(queries)), desc="old and new in turns", mininterval=2.0):
                for case, request in [
                    *((case, {"case": case}) for case in cases),
                    *((f"{mode} {case}", {"case": case, "mode": mode, "text": texts[number]}) for case, mode in modes),
                ]:
                    for name in order if number % 2 == 0 else order[::-1]:
                        samples[name].setdefault(case, []).append(ask(name, {**request, "query": number}))
            totals = {name: ask(name, None) for name in workers}
            for worker in workers.values():
                worker.wait(timeout=600)
        finally:
            for worker in workers.values():
                if worker.poll() is None:
                    worker.kill()
    load_after = os.getloadavg()[0]
    result: dict[str, Any] = {}
    baseline = samples[f"embedded@{revision}"]
    for name, by_case in samples.items():
        cells: dict[str, Any] = {"modes": {case: {} for case, _ in modes}}
        for case, answers in by_case.items():
            ms = np.asarray([answer["ms"] for answer in answers])
            cpu = np.asarray([answer["cpu_ms"] for answer in answers])
            cell: dict[str, Any] = {
                "p50_ms": round(float(np.percentile(ms, 50)), 3),
                "p99_ms": round(float(np.percentile(ms, 99)), 3),
                "cpu_p50_ms": round(float(np.percentile(cpu, 50)), 3),
                "cpu_p99_ms": round(float(np.percentile(cpu, 99)), 3),
            }
            if case in cases:
                found = [set(answer["ids"]) for answer in answers]
                recalls = [len(t & f) / min(10, len(t)) for t, f in zip(truth[case], found) if t]
                cells[case] = {**cell, "recall_at_10": round(float(np.mean(recalls)), 4)}
                continue
            mode, of_case = case.split(" ", 1)
            same = [(a["ids"], a["scores"]) == (b["ids"], b["scores"]) for a, b in zip(answers, baseline[case])]
            cells["modes"][of_case][mode] = {**cell, "same_hits_and_scores_as_baseline": round(float(np.mean(same)), 4)}
        for by_mode in cells["modes"].values():
            by_mode["hybrid_over_semantic_p50"] = round(by_mode["hybrid"]["p50_ms"] / by_mode["semantic"]["p50_ms"], 2)
        cells["cpu_ms_per_search_incl_idle_spin"] = round(totals[name]["cpu_total_ms"] / totals[name]["searches"], 3)
        cells["load_average"] = [round(load_before, 2), round(load_after, 2)]
        result[name] = cells
    return result
