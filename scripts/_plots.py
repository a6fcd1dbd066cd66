"""PNG charts of benchmark results, written beside their JSON (``x.json`` -> ``x.png``).

One function per benchmark, each taking the very dict the script wrote as
JSON, so a chart can be redrawn from a saved result:

    python scripts/_plots.py bench-results/search.json bench-results/memory.json ...

matplotlib's Agg backend draws without a display.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

CASE_MARKERS = {
    "unfiltered": "o",
    "filter 1%": "s",
    "filter 30%": "^",
    "metadata 30%": "v",
    "metadata in 5": "D",
    "metadata range 10%": "P",
    "metadata contains 11%": "X",
}


def png_beside(json_path: Path) -> Path:
    return json_path.with_suffix(".png")


def write_report(out: Path, report: Any, plot: Callable[[Any, Path], Path]) -> Path:
    """Every benchmark's last step: ``report`` as JSON at ``out``, its chart beside it, both named; the chart's path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    png = plot(report, png_beside(out))
    print(f"\nwrote {out} and {png}")
    return png


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not figure.get_tight_layout() and not figure.legends:
        figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _lines(axes: Axes, series: dict[str, list[tuple[float, float]]], xlabel: str, ylabel: str, title: str) -> None:
    for name, points in series.items():
        xs, ys = zip(*sorted(points))
        axes.plot(xs, ys, marker="o", label=name)
    axes.set(xlabel=xlabel, ylabel=ylabel, title=title)
    axes.set_xscale("log", base=2)
    ticks = sorted({x for points in series.values() for x, _ in points})
    axes.set_xticks(ticks, [f"{x:g}" for x in ticks])
    axes.minorticks_off()
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)


def plot_search(result: dict[str, Any], path: Path) -> Path:
    """Per store size: recall@10 against p50 latency (a colour per backend, exact search too, a marker per
    filter) above p50 as a ratio to the exact scan per case, with the issue's 2x target drawn."""
    sizes = list(result["sizes"].items())
    width = 4.8 * len(sizes) + 2.0
    figure, panels = plt.subplots(3, len(sizes), figsize=(width, 12.4), squeeze=False)
    colours: dict[str, str] = {}
    lowest = 1.0
    for column, (size, row) in enumerate(sizes):
        axes, ratio_axes = panels[0][column], panels[1][column]
        for backend, cells in row.items():
            if not isinstance(cells, dict) or not any(case in cells for case in CASE_MARKERS):
                continue
            colour = colours.setdefault(backend, f"C{len(colours)}")
            for case, marker in CASE_MARKERS.items():
                if case in cells:
                    lowest = min(lowest, cells[case]["recall_at_10"])
                    axes.scatter(
                        cells[case]["p50_ms"],
                        cells[case]["recall_at_10"],
                        color=colour,
                        marker=marker,
                        s=55,
                        alpha=0.85,
                        zorder=3,
                    )
        axes.set_xscale("log")
        axes.set(xlabel="p50 ms per query (log)", ylabel="recall@10", title=f"{int(size):,} chunks")
        axes.grid(True, alpha=0.3, which="both")
        axes.set_ylim(min(0.9, lowest - 0.05), 1.02)
        ratios = row.get("ratio_to_exact_p50", [])
        backends = list(dict.fromkeys(name for name, _, _ in ratios))
        cases = [case for case in CASE_MARKERS if any(c == case for _, c, _ in ratios)]
        bar = 0.8 / max(len(backends), 1)
        for at, backend in enumerate(backends):
            by_case = {case: ratio for name, case, ratio in ratios if name == backend}
            ratio_axes.bar(
                [i + at * bar for i in range(len(cases))],
                [by_case.get(case, 0.0) for case in cases],
                bar,
                color=colours.setdefault(backend, f"C{len(colours)}"),
            )
        ratio_axes.axhline(2.0, color="grey", linestyle="--", linewidth=1)
        ratio_axes.axhline(1.0, color="black", linewidth=0.6)
        ratio_axes.set_yscale("log")
        ratio_axes.set_xticks([i + 0.4 - bar / 2 for i in range(len(cases))], cases, rotation=30, ha="right")
        ratio_axes.set(ylabel="p50 / exact scan p50 (log; dashed: 2x)")
        ratio_axes.grid(True, alpha=0.3, axis="y", which="both")
        _plot_modes(panels[2][column], row, colours)
    handles = [Line2D([], [], color=c, marker="o", linestyle="", label=n) for n, c in colours.items()]
    handles += [Line2D([], [], color="grey", marker=m, linestyle="", label=case) for case, m in CASE_MARKERS.items()]
    figure.legend(handles=handles, fontsize=8, loc="center right")
    figure.suptitle("Search: recall@10 by p50, p50 against the exact scan, p50 by mode")
    # the legend's 2 inches on the right; room below for the slanted case names
    figure.subplots_adjust(left=0.9 / width, right=1 - 2.1 / width, bottom=0.1, top=0.94, hspace=0.55, wspace=0.3)
    return _save(figure, path)


def _plot_modes(axes: Axes, row: dict[str, Any], colours: dict[str, str]) -> None:
    """p50 of the service's ranking by mode and case, a bar per backend, the exact scan's p50 per case dotted."""
    bars = [
        (backend, case, mode, cell["p50_ms"])
        for backend, cells in row.items()
        if isinstance(cells, dict) and isinstance(cells.get("modes"), dict)
        for case, by_mode in cells["modes"].items()
        for mode, cell in by_mode.items()
        if isinstance(cell, dict)
    ]
    groups = list(dict.fromkeys((case, mode) for _, case, mode, _ in bars))
    backends = list(dict.fromkeys(backend for backend, _, _, _ in bars))
    width = 0.8 / max(len(backends), 1)
    for at, backend in enumerate(backends):
        p50 = {(case, mode): ms for name, case, mode, ms in bars if name == backend}
        axes.bar(
            [i + at * width for i in range(len(groups))],
            [p50.get(group, 0.0) for group in groups],
            width,
            color=colours.setdefault(backend, f"C{len(colours)}"),
        )
    exact = row.get("exact (numpy)", {})
    for i, (case, _) in enumerate(groups):
        if case in exact:
            axes.hlines(exact[case]["p50_ms"], i - width / 2, i + 0.8 - width / 2, colors="black", linestyles=":")
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))], [f"{m} {c}" for c, m in groups], rotation=30)
    axes.set_yscale("log")
    axes.set(ylabel="p50 ms by mode (log; dotted: exact scan)")
    axes.grid(True, alpha=0.3, axis="y", which="both")


def plot_memory(result: dict[str, Any], path: Path) -> Path:
    """Requests/s by concurrency: the memory API beside an aiohttp hello-world."""
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in result["results"]:
        series[row["case"]].append((row["concurrency"], row["req_per_s"]))
    figure, axes = plt.subplots(figsize=(7, 4.5))
    _lines(axes, series, "concurrent clients", "requests/s", "Memory API throughput by concurrency")
    return _save(figure, path)


def plot_http(result: dict[str, Any], path: Path) -> Path:
    """Search requests/s and p50 by concurrency, and ingestion chunks/s over HTTP against the raw embedder."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    rows = result["search"]
    _lines(
        left,
        {"search req/s": [(r["concurrency"], r["req_per_s"]) for r in rows]},
        "concurrent clients",
        "requests/s",
        "Search over HTTP by concurrency",
    )
    latency = left.twinx()
    latency.plot(
        [r["concurrency"] for r in rows],
        [r["p50_ms"] for r in rows],
        color="C1",
        marker="s",
        linestyle="--",
        label="search p50 ms",
    )
    latency.set_ylabel("p50 ms", color="C1")
    latency.set_ylim(bottom=0)
    left.legend(handles=left.lines + latency.lines, fontsize=8, loc="upper left")
    ingest = result["ingest"]
    names = ["raw embedder", "over HTTP"]
    values = [ingest["raw_embedder_chunks_per_s"], ingest["http_chunks_per_s"]]
    right.bar(names, values, color=["C2", "C0"])
    right.set(ylabel="chunks/s", title=f"Ingestion ({ingest['fraction_of_raw']:.0%} of raw)")
    right.grid(True, axis="y", alpha=0.3)
    return _save(figure, path)


def plot_embedder(result: dict[str, Any], path: Path) -> Path:
    """Items/s by batch size, per engine, one panel per workload."""
    workloads = list(dict.fromkeys(row["workload"] for row in result["results"]))
    figure, panels = plt.subplots(1, len(workloads), figsize=(5 * len(workloads), 4.2), squeeze=False)
    for axes, workload in zip(panels[0], workloads):
        series: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for row in result["results"]:
            if row["workload"] == workload:
                series[row["engine"]].append((row["batch"], row["items_per_s"]))
        _lines(axes, series, "batch size", "texts/s", f"Embedder: {workload}")
    return _save(figure, path)


def plot_loadtest(result: dict[str, Any], path: Path) -> Path:
    """Latency percentiles per operation under the mixed load."""
    operations = result["operations"]
    names = list(operations)
    figure, axes = plt.subplots(figsize=(8, 4.2))
    width = 0.27
    for offset, percentile in enumerate(("p50_ms", "p90_ms", "p99_ms")):
        xs = [i + (offset - 1) * width for i in range(len(names))]
        axes.bar(xs, [operations[name][percentile] for name in names], width, label=percentile.replace("_ms", ""))
    axes.set_xticks(range(len(names)), [f"{n}\n{operations[n]['throughput_rps']:.0f}/s" for n in names], fontsize=8)
    axes.set_yscale("log")
    axes.set(
        ylabel="latency (ms, log)",
        title=f"Mixed load at concurrency {result['concurrency']}: {result['throughput_rps']:.0f} req/s in all",
    )
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return _save(figure, path)


def plot_stall(result: dict[str, Any], path: Path) -> Path:
    """``GET /_health`` latency probe by probe and as a CDF: idle, and while wildcard searches run."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    series = {"idle": result["health_idle_ms"], "during wildcard searches": result["health_during_searches_ms"]}
    for name, values in series.items():
        left.plot(values, label=name, linewidth=0.8)
        ordered = sorted(values)
        right.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=name)
    for axes in (left, right):
        axes.grid(True, alpha=0.3)
    left.axhline(50, color="red", linestyle="--", linewidth=0.8, label="50 ms target")
    left.set(xlabel="probe (one every 10 ms)", ylabel="GET /_health latency (ms)", yscale="log")
    left.legend(fontsize=8)
    right.axvline(50, color="red", linestyle="--", linewidth=0.8)
    right.set(xlabel="latency (ms)", ylabel="fraction of probes", xscale="log")
    right.legend(fontsize=8)
    figure.suptitle(
        f"/_health during wildcard _search: {result['memories']} memories, {result['searchers']} searchers"
        f" ({result['source']})"
    )
    return _save(figure, path)


def plot_fairness(result: dict[str, Any], path: Path) -> Path:
    """One organisation's single record (acknowledged, searchable) on an idle server and during another's bulk load."""
    rows = [("idle", result["idle"])] + [(f"probe {n}", row) for n, row in enumerate(result["during_bulk"], 1)]
    figure, axes = plt.subplots(figsize=(7, 4))
    xs = range(len(rows))
    axes.bar([x - 0.2 for x in xs], [row["acknowledged_s"] for _, row in rows], width=0.4, label="acknowledged")
    axes.bar([x + 0.2 for x in xs], [row["searchable_s"] for _, row in rows], width=0.4, label="searchable")
    axes.set_xticks(list(xs), [name for name, _ in rows])
    axes.set(ylabel="seconds", title=f"A single record while another organisation ingests {result['bulk_mib']} MiB")
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return _save(figure, path)


def plot_bridge(result: dict[str, Any], path: Path) -> Path:
    """Create and list message throughput per system, and how long after the load the last interaction is searchable."""
    rows = result["results"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    systems = list(dict.fromkeys(row["system"] for row in rows))
    operations = list(dict.fromkeys(row.get("operation", "create message") for row in rows))
    width = 0.8 / len(operations)
    for n, operation in enumerate(operations):
        rate = {row["system"]: row["req_per_s"] for row in rows if row.get("operation", "create message") == operation}
        xs = [x + (n - (len(operations) - 1) / 2) * width for x in range(len(systems))]
        left.bar(xs, [rate.get(system, 0) for system in systems], width, label=operation, color=f"C{n}")
    left.set_xticks(range(len(systems)), systems)
    left.set(ylabel="requests/s", title=f"Messages, {result['concurrency']} clients")
    left.grid(True, axis="y", alpha=0.3)
    left.legend(fontsize=8)
    lagging = [row for row in rows if row.get("last_searchable_after_s") is not None]
    right.bar(
        [row["system"] for row in lagging], [row["last_searchable_after_s"] for row in lagging], color="C2", width=0.5
    )
    right.set(ylabel="seconds after the create load ends", title="Last acknowledged interaction searchable")
    right.grid(True, axis="y", alpha=0.3)
    for axes in (left, right):
        axes.tick_params(axis="x", labelsize=8)
    return _save(figure, path)


def plot_agentic(result: dict[str, Any], path: Path) -> Path:
    """Adding memories (infer off) in requests/s, and search latency over the long-term memories."""
    rows = result["results"]
    adds = [r for r in rows if r["case"].startswith("add")]
    searches = [r for r in rows if r["case"].startswith(("semantic", "hybrid", "bm25", "knn"))]
    figure, (left, right) = plt.subplots(1, 2, figsize=(16, 6))
    left.bar(range(len(adds)), [r["req_per_s"] for r in adds], color="#4c72b0")
    left.set_xticks(range(len(adds)), [r["case"] for r in adds], rotation=20, ha="right", fontsize=8)
    left.set_title(f"add memory, infer off, concurrency {adds[0]['concurrency'] if adds else '-'}")
    left.set_ylabel("requests / s")
    xs = range(len(searches))
    right.bar([x - 0.2 for x in xs], [r["p50_ms"] for r in searches], 0.4, label="p50")
    right.bar([x + 0.2 for x in xs], [r["p99_ms"] for r in searches], 0.4, label="p99")
    right.set_xticks(list(xs), [r["case"] for r in searches], rotation=30, ha="right", fontsize=7)
    right.set_ylabel("ms (query embedding included)")
    right.set_title(f"search over {searches[0]['memories'] if searches else 0:,} long-term memories")
    right.legend()
    return _save(figure, path)


def plot_dsl(result: dict[str, Any], path: Path) -> Path:
    """The session-load ``_search`` of working memory: p50 and p95 by container size, postings and full scan."""
    figure, axes = plt.subplots(figsize=(9, 6))
    for mode, color in (("postings", "#4c72b0"), ("full scan", "#c44e52")):
        rows = [r for r in result["results"] if mode in r]
        for stat, style in (("p50_ms", "-"), ("p95_ms", "--")):
            if rows:
                xs, ys = [r["memories"] for r in rows], [r[mode][stat] for r in rows]
                axes.plot(xs, ys, style, marker="o", color=color, label=f"{mode} {stat[:3]}")
    axes.set(xscale="log", yscale="log", xlabel="working memories in the container", ylabel="ms")
    axes.set_title(f"one session's last 10 messages, {result['sessions']} sessions (_search through the service)")
    axes.legend()
    return _save(figure, path)


def plot_locomo(result: dict[str, Any], path: Path) -> Path:
    """LoCoMo recall per surface: overall at 5, 10 and 25, and at 10 per question category."""
    surfaces = list(result["recall"])
    figure, (left, right) = plt.subplots(1, 2, figsize=(16, 6))
    xs = range(len(surfaces))
    for offset, depth in zip((-0.27, 0.0, 0.27), ("R@5", "R@10", "R@25")):
        left.bar([x + offset for x in xs], [result["recall"][s][depth] for s in surfaces], 0.27, label=depth)
    left.set_xticks(list(xs), surfaces, rotation=30, ha="right", fontsize=8)
    left.set_ylim(0, 1)
    left.set_ylabel("recall of the evidence turns")
    left.set_title(f"LoCoMo: {result['questions']} questions, {result['turns']} turns")
    left.legend()
    categories = [c for c in ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")]
    width = 0.8 / max(1, len(surfaces))
    for n, surface in enumerate(surfaces):
        row = result["recall"][surface]
        right.bar(
            [c + (n - (len(surfaces) - 1) / 2) * width for c in range(len(categories))],
            [row.get(category, {}).get("R@10", 0.0) for category in categories],
            width,
            label=surface,
        )
    right.set_xticks(range(len(categories)), categories)
    right.set_ylim(0, 1)
    right.set_ylabel("recall@10")
    right.set_title("recall@10 by question category")
    right.legend(fontsize=7)
    return _save(figure, path)


def plot_opensearch_memory_search(result: dict[str, Any], path: Path) -> Path:
    """Median ``_search`` latency per body: paging everything into Python (before) against OpenSearch (after)."""
    rows = result["results"]
    labels = [f"{row['index']}\n{row['body']}" for row in rows]
    figure, axes = plt.subplots(figsize=(max(6.0, 1.6 * len(rows)), 4.2))
    xs = range(len(rows))
    axes.bar([x - 0.2 for x in xs], [row["before_p50_ms"] for row in rows], 0.4, label="before: page all + Python")
    axes.bar([x + 0.2 for x in xs], [row["after_p50_ms"] for row in rows], 0.4, label="after: run in OpenSearch")
    axes.set_xticks(list(xs), labels, fontsize=8)
    axes.set(
        ylabel="p50 ms (log)",
        yscale="log",
        title=f"Memory _search, one user with {result['conversations']} memories / {result['messages']} messages",
    )
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return _save(figure, path)


def plot_scaleout(result: dict[str, Any], path: Path) -> Path:
    """Requests/s per case by worker count, and where each request's CPU went (server, OpenSearch, client)."""
    rows = result["results"]
    cases = list(dict.fromkeys(row["case"] for row in rows))
    workers = sorted({row["workers"] for row in rows})
    by = {(row["case"], row["workers"]): row for row in rows}
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(workers)
    for n, count in enumerate(workers):
        xs = [x + (n - (len(workers) - 1) / 2) * width for x in range(len(cases))]
        left.bar(
            xs,
            [by[case, count]["req_per_s"] if (case, count) in by else 0 for case in cases],
            width,
            label=f"{count} worker{'s' if count > 1 else ''}",
            color=f"C{n}",
        )
    left.set_xticks(range(len(cases)), cases)
    left.set(ylabel="requests/s", title=f"{result['concurrency']} clients, {result['cores']} cores, all on OpenSearch")
    left.grid(True, axis="y", alpha=0.3)
    left.legend(fontsize=8)
    labels = [f"{row['case']}\n{row['workers']}w" for row in rows]
    bottom = [0.0] * len(rows)
    for n, part in enumerate(("server", "opensearch", "client")):
        heights = [row[f"{part}_cpu_ms_per_request"] for row in rows]
        right.bar(range(len(rows)), heights, 0.6, bottom=bottom, label=part, color=f"C{n + 3}")
        bottom = [b + h for b, h in zip(bottom, heights)]
    right.set_xticks(range(len(rows)), labels, fontsize=7)
    right.set(ylabel="CPU ms per request", title="Where the CPU goes")
    right.grid(True, axis="y", alpha=0.3)
    right.legend(fontsize=8)
    return _save(figure, path)


def plot_opensearch(result: dict[str, Any], path: Path) -> Path:
    """Requests/s of each target per case (a tick where its messages were searchable at a lower rate), and the
    CPU each operation cost, the node's and this server's: ml-commons beside this server."""
    rows = result["results"]
    cases = list(dict.fromkeys(f"{row['op']}, {row['memories']} mem" for row in rows))
    targets = list(dict.fromkeys(row["target"] for row in rows))
    by = {(row["target"], f"{row['op']}, {row['memories']} mem"): row for row in rows}
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / len(targets)
    for n, target in enumerate(targets):
        xs = [x + (n - (len(targets) - 1) / 2) * width for x in range(len(cases))]
        found = [by.get((target, case)) for case in cases]
        left.bar(xs, [row["req_per_s"] if row else 0 for row in found], width, label=target, color=f"C{n}")
        slower = [
            (x, row["searchable_req_per_s"])
            for x, row in zip(xs, found)
            if row and row["searchable_req_per_s"] < row["req_per_s"]
        ]
        if slower:
            left.scatter(*zip(*slower), marker="_", s=120, color="black", zorder=3)
        node = [row["opensearch_cpu_ms_per_op"] if row else 0 for row in found]
        ours = [row["server_cpu_ms_per_op"] if row else 0 for row in found]
        right.bar(xs, node, width, color=f"C{n}")
        right.bar(xs, ours, width, bottom=node, color=f"C{n}", hatch="//", edgecolor="white", alpha=0.6)
    left.set(ylabel="requests/s", title=f"{result['concurrency']} clients, one node, {result['cores']} cores")
    right.set(ylabel="CPU ms per operation", title="What each operation cost: the node (solid), this server (hatched)")
    for axis in (left, right):
        axis.set_xticks(range(len(cases)), cases, fontsize=8)
        axis.grid(True, axis="y", alpha=0.3)
    left.legend(fontsize=7, title="bars: acknowledged; black tick: made searchable", title_fontsize=7)
    return _save(figure, path)


PLOTTERS = {
    "locomo": plot_locomo,
    "dsl": plot_dsl,
    "agentic": plot_agentic,
    "bridge": plot_bridge,
    "scaleout": plot_scaleout,
    "opensearch": plot_opensearch,
    "opensearch_memory_search": plot_opensearch_memory_search,
    "fairness": plot_fairness,
    "search": plot_search,
    "memory": plot_memory,
    "http": plot_http,
    "embedder": plot_embedder,
    "loadtest": plot_loadtest,
    "stall": plot_stall,
}


def plot_file(json_path: Path) -> Path:
    """Redraw the chart of a saved result; the kind is the file's stem (search.json -> plot_search)."""
    kind = next((name for name in PLOTTERS if json_path.stem.startswith(name)), None)
    if kind is None:
        raise SystemExit(f"{json_path}: name it after one of {sorted(PLOTTERS)}")
    return PLOTTERS[kind](json.loads(json_path.read_text()), png_beside(json_path))


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"wrote {plot_file(Path(name))}")
