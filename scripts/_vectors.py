"""Embedding-like vectors for benchmarks (uniform random vectors mislead HNSW benchmarks).

Real e5 embeddings share a strong common direction (mean pairwise cosine about
0.7), gather in topical clusters and vary mostly within a low-dimensional
subspace.  :func:`synthetic` builds that shape from scratch; :func:`from_seed`
mixes and perturbs real embeddings (a ``.npy`` of shape ``(n, dim)``) into as
many vectors as needed.
"""

from __future__ import annotations

import numpy as np


def _normalise(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def synthetic(n: int, dim: int, seed: int = 0, clusters: int | None = None) -> np.ndarray:
    """``shared + cluster centre + low-rank variation + a little isotropic noise``.

    The weights give a mean pairwise cosine of about 0.7 and nearest-neighbour
    cosines around 0.9, like e5-small on short conversational texts.
    """
    rng = np.random.default_rng(seed)
    clusters = clusters or max(50, min(2000, n // 200))
    shared = _normalise(rng.standard_normal((1, dim)))[0]
    centres = _normalise(rng.standard_normal((clusters, dim)))
    basis = _normalise(rng.standard_normal((48, dim)))  # the within-topic variation subspace
    spectrum = (1.0 / np.sqrt(np.arange(1, 49))).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        local = rng.standard_normal((m, 48)).astype(np.float32) * spectrum
        local = local / np.linalg.norm(local, axis=1, keepdims=True)
        noise = rng.standard_normal((m, dim)).astype(np.float32) / np.sqrt(dim)
        block = 0.83 * shared + 0.42 * centres[rng.integers(0, clusters, m)] + 0.3 * (local @ basis) + 0.12 * noise
        out[start : start + m] = _normalise(block)
    return out


def from_seed(seed_vectors: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """``n`` vectors made by mixing pairs of real ones and adding small noise.

    Each output is ``x_i + t (x_j - x_i) + noise`` with ``j`` a random other seed
    vector, ``t`` in [0, 0.3) and noise at 3% of a unit vector's norm, so the
    set keeps the real vectors' shared direction and clusters.
    """
    rng = np.random.default_rng(seed)
    base = _normalise(np.asarray(seed_vectors, dtype=np.float32))
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        i, j = rng.integers(0, len(base), m), rng.integers(0, len(base), m)
        t = rng.random((m, 1)).astype(np.float32) * 0.3
        noise = rng.standard_normal((m, base.shape[1])).astype(np.float32) * (0.03 / np.sqrt(base.shape[1]))
        out[start : start + m] = _normalise(base[i] + t * (base[j] - base[i]) + noise)
    return out


def mean_pairwise_cosine(vectors: np.ndarray, sample: int = 2000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    picked = vectors[rng.choice(len(vectors), min(sample, len(vectors)), replace=False)]
    gram = picked @ picked.T
    m = len(picked)
    return float((gram.sum() - np.trace(gram)) / (m * (m - 1)))


def real_texts(n: int) -> list[str]:
    """Up to ``n`` distinct real English paragraphs: the package descriptions installed here."""
    import glob
    import re
    import sys

    seen: dict[str, None] = {}
    for path in sorted(glob.glob(f"{sys.prefix}/lib/python*/site-packages/*.dist-info/METADATA")):
        with open(path, encoding="utf-8", errors="replace") as file:
            body = file.read().split("\n\n", 1)[-1]
        for paragraph in re.split(r"\n\s*\n", body):
            text = " ".join(paragraph.split())
            if 60 <= len(text) <= 600 and sum(c.isalpha() for c in text) > 0.6 * len(text):
                seen.setdefault(text, None)
    return list(seen)[:n]


if __name__ == "__main__":
    import argparse
    import time
    from pathlib import Path

    parser = argparse.ArgumentParser(description="Embed real texts with the default model into a seed .npy")
    parser.add_argument("--texts", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=Path("bench-results/seed-vectors.npy"))
    args = parser.parse_args()
    sys_path = str(Path(__file__).resolve().parent.parent)
    import sys

    sys.path.insert(0, sys_path)
    from embedder import Embedder, ensure_default_model

    texts = real_texts(args.texts)
    embedder = Embedder.from_dir(ensure_default_model())
    started = time.perf_counter()
    vectors = embedder.passage(texts)
    print(
        f"embedded {len(texts)} texts in {time.perf_counter() - started:.1f}s; "
        f"mean pairwise cosine {mean_pairwise_cosine(vectors):.3f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, vectors)
