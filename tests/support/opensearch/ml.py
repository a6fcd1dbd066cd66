"""A real OpenSearch 2.19.1 node with the real ml-commons plugin: the judge of drop-in fidelity.

Built from Maven Central like the k-NN nodes: the cached k-NN distribution is
copied into its own home and job-scheduler then ml-commons are installed into it
(ml-commons declares ``extended.plugins=opensearch-job-scheduler``).  The ml zip
is about 360 MB, mostly a GPU runtime that is never loaded; it stays in ``~/.m2``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.opensearch.distribution import (
    INSTALLED_STAMP,
    OPENSEARCH_VERSION,
    base_env,
    ensure_distribution,
    file_lock,
    install_modules,
    log,
    make_world_readable,
    maven_fetch,
    run,
)
from tests.support.opensearch.nodes import OpenSearchNode

ML_VERSION = f"{OPENSEARCH_VERSION}.0"
ML_PLUGINS = (  # in this order: ml-commons extends job-scheduler
    ("opensearch-job-scheduler", f"org.opensearch.plugin:opensearch-job-scheduler:{ML_VERSION}:zip"),
    ("opensearch-ml", f"org.opensearch.plugin:opensearch-ml-plugin:{ML_VERSION}:zip"),
)
ML_STAMP = ".memory_plugin-ml-installed"
#: The two ml-commons memory indices; deleting them gives the node a fresh memory state.
MEMORY_INDICES = ".plugins-ml-memory-meta,.plugins-ml-memory-message"


def ensure_ml_distribution() -> Path:
    """OpenSearch + k-NN + job-scheduler + ml-commons, installed once beside the k-NN home."""
    base = ensure_distribution()
    home = base.parent / f"{base.name}-ml"
    with file_lock(base.parent / f".{home.name}.lock"):
        if (home / ML_STAMP).is_file():
            install_modules(home, base.parent / "downloads")  # a module added since the install
            return home
        started = time.monotonic()
        downloads = base.parent / "downloads"
        zips = [(name, maven_fetch(artifact, downloads)) for name, artifact in ML_PLUGINS]
        staging = Path(tempfile.mkdtemp(prefix=".ml-", dir=base.parent)) / "home"
        shutil.copytree(base, staging, symlinks=True)
        for name, archive in zips:
            run(
                [str(staging / "bin" / "opensearch-plugin"), "install", "--batch", archive.resolve().as_uri()],
                what=f"Installing {name}",
                env=base_env(),
            )
        make_world_readable(staging)
        (staging / INSTALLED_STAMP).write_text(
            json.dumps({"opensearch": OPENSEARCH_VERSION, "ml": ML_VERSION, "time": time.time()})
        )
        (staging / ML_STAMP).write_text(ML_VERSION)
        shutil.rmtree(home, ignore_errors=True)
        staging.rename(home)
        shutil.rmtree(staging.parent, ignore_errors=True)
        log(
            f"OpenSearch {OPENSEARCH_VERSION} + ml-commons {ML_VERSION} ready in {home} ({time.monotonic() - started:.1f}s)"
        )
        return home


@contextmanager
def ml_node(base_dir: str | None = None) -> Iterator[OpenSearchNode]:
    """One green ml-commons node for the duration of the block, its folder in ``base_dir`` (default: the system's
    temporary folder)."""
    node = OpenSearchNode(
        "ml-commons",
        home=ensure_ml_distribution(),
        heap="1g",
        base_dir=base_dir,
        extra_settings={"plugins.ml_commons.only_run_on_ml_node": False},
    )
    try:
        yield node.start(timeout=240)
    finally:
        node.close()
