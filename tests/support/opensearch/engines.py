"""Which k-NN engines work on this install (only ``lucene`` does with the Maven zip)."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.opensearch.distribution import default_home
from tests.support.opensearch.nodes import http_json, start_nodes

# --------------------------------------------------------------------------- k-NN engine check

_ENGINE_VECTORS = {
    "a": [1.0, 0.0, 0.0, 0.0],
    "b": [0.8, 0.6, 0.0, 0.0],
    "c": [0.0, 1.0, 0.0, 0.0],
    "d": [-1.0, 0.2, 0.1, 0.0],
    "e": [0.5, 0.5, 0.5, 0.5],
}
_QUERY = [0.9, 0.3, 0.1, 0.2]
_SCORE_FORMULAS = {
    "(1 + cos) / 2": lambda c: (1 + c) / 2,
    "1 / (2 - cos)  [= 1 / (1 + (1 - cos))]": lambda c: 1 / (2 - c),
    "cos": lambda c: c,
    "1 + cos": lambda c: 1 + c,
}


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def small_knn_index(engine: str, keyword: str) -> dict[str, Any]:
    """The body of a one-shard index with a 4-dimensional cosine ``vec`` on ``engine`` and a keyword field to filter by."""
    return {
        "settings": {"index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 0}},
        "mappings": {
            "properties": {
                "vec": {
                    "type": "knn_vector",
                    "dimension": 4,
                    "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": engine},
                },
                keyword: {"type": "keyword"},
            }
        },
    }


def check_knn_engine(url: str, engine: str) -> dict[str, Any]:
    """Create a cosinesimil hnsw index for *engine*, index docs, run filtered + plain knn queries."""
    index = f"knn-engine-check-{engine}"
    result: dict[str, Any] = {"engine": engine, "works": False}
    with contextlib.suppress(Exception):
        http_json(f"{url}/{index}", "DELETE")
    mapping = small_knn_index(engine, "tag")
    try:
        status, body = http_json(f"{url}/{index}", "PUT", mapping)
        if status != 200:
            result["error"] = f"create index: HTTP {status}: {body}"
            return result
        bulk = "".join(
            json.dumps({"index": {"_index": index, "_id": k}})
            + "\n"
            + json.dumps({"vec": v, "tag": "even" if i % 2 == 0 else "odd"})
            + "\n"
            for i, (k, v) in enumerate(_ENGINE_VECTORS.items())
        )
        status, body = http_json(f"{url}/_bulk?refresh=true", "POST", bulk)
        if status != 200 or body.get("errors"):
            result["error"] = f"bulk: HTTP {status}: {str(body)[:2000]}"
            return result
        status, body = http_json(
            f"{url}/{index}/_search", "POST", {"size": 5, "query": {"knn": {"vec": {"vector": _QUERY, "k": 5}}}}
        )
        if status != 200:
            result["error"] = f"knn query: HTTP {status}: {str(body)[:2000]}"
            return result
        hits = body["hits"]["hits"]
        pairs = [(_cos(_QUERY, _ENGINE_VECTORS[h["_id"]]), h["_score"]) for h in hits]
        result["hits"] = [
            {"id": h["_id"], "score": h["_score"], "cos": round(_cos(_QUERY, _ENGINE_VECTORS[h["_id"]]), 6)}
            for h in hits
        ]
        result["score_formula"] = next(
            (name for name, f in _SCORE_FORMULAS.items() if pairs and all(abs(f(c) - s) < 1e-4 for c, s in pairs)),
            "unknown",
        )
        status, body = http_json(
            f"{url}/{index}/_search",
            "POST",
            {"size": 3, "query": {"knn": {"vec": {"vector": _QUERY, "k": 3, "filter": {"term": {"tag": "even"}}}}}},
        )
        if status != 200:
            result["filter_error"] = f"HTTP {status}: {str(body)[:2000]}"
            result["efficient_filter"] = False
        else:
            ids = [h["_id"] for h in body["hits"]["hits"]]
            result["filtered_ids"] = ids
            result["efficient_filter"] = bool(ids) and set(ids) <= {"a", "c", "e"}
        result["works"] = True
        return result
    except Exception as exc:  # report, never crash the check
        result["error"] = repr(exc)
        return result
    finally:
        with contextlib.suppress(Exception):
            http_json(f"{url}/{index}", "DELETE")


NATIVE_ENGINES = ("faiss", "nmslib")


def native_knn_libraries(home: Path | str | None = None) -> list[Path]:
    """The k-NN JNI libraries (libopensearchknn_*.so) present in the install; empty for the Maven zip."""
    home = Path(home) if home else default_home()
    return sorted((home / "plugins" / "opensearch-knn").rglob("libopensearchknn_*"))


def check_knn_engines(
    url: str,
    engines: Sequence[str] = ("lucene", "faiss", "nmslib"),
    *,
    home: Path | str | None = None,
    unsafe: bool = False,
) -> dict[str, dict[str, Any]]:
    """Check each engine on the node at *url*.

    Native engines (faiss, nmslib) are only tried when their JNI libraries are installed or
    *unsafe* is set: without them the first flush of a native index throws UnsatisfiedLinkError,
    which OpenSearch treats as fatal -- the whole node exits.
    """
    results = {}
    has_native = bool(native_knn_libraries(home))
    for engine in engines:
        if engine in NATIVE_ENGINES and not (has_native or unsafe):
            results[engine] = {
                "engine": engine,
                "works": False,
                "error": "k-NN JNI libraries (libopensearchknn_*.so) are not in the Maven Central plugin zip; "
                "indexing into a native-engine index kills the node (UnsatisfiedLinkError is fatal). "
                "Not tried; use `engines --isolated` to try it on a throwaway node.",
            }
            continue
        results[engine] = check_knn_engine(url, engine)
    return results


def check_knn_engines_isolated(
    engines: Sequence[str] = ("lucene", "faiss", "nmslib"), *, home: Path | str | None = None
) -> dict[str, dict[str, Any]]:
    """Try every engine on its own throwaway node (a crash of one cannot hide another's result)."""
    results = {}
    for engine in engines:
        with start_nodes(1, home=home, name_prefix=f"engine-{engine}") as nodes:
            res = check_knn_engine(nodes[0].url, engine)
            if not res["works"] and nodes[0].process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    nodes[0].process.wait(10)  # a fatal error takes a moment to end the JVM
            if not nodes[0].is_running():
                res["works"] = False
                res["node_crashed"] = True
                res["log_tail"] = [
                    line
                    for line in nodes[0].log_tail(400).splitlines()
                    if "UnsatisfiedLinkError" in line or "fatal error" in line
                ][:4]
            results[engine] = res
    return results
