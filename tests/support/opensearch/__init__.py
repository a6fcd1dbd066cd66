"""Real OpenSearch 2.19.1 nodes (with the k-NN plugin) for tests and benchmarks.

Everything comes from Maven Central through Maven's own client (``mvn``), so the
only prerequisites are Java 17+ and Maven.  Downloads stay in ``~/.m2``; the
unpacked distribution is cached in ``~/.cache/memory_plugin/opensearch-2.19.1``
(override with ``MEMORY_PLUGIN_OPENSEARCH_HOME`` or ``--home``).

The integ-test distribution ships only the ``transport-netty4`` module and no
security plugin.  The k-NN plugin declares ``extended.plugins=lang-painless``,
so the helper assembles the ``lang-painless`` module from its Maven jars
(``org.opensearch.plugin:lang-painless:2.19.1`` and its pom dependencies)
before installing k-NN.

OpenSearch refuses to run as root.  When this process is root, each node runs
as an unprivileged system user (default ``opensearch``, override with
``MEMORY_PLUGIN_OPENSEARCH_USER``), created with ``useradd`` on first use; its
data/log/config folders are chowned to that user, and the distribution is
mirrored to a world-readable folder when the cache lives under an unreadable
home (``/root`` is mode 0700).  The user switch goes through util-linux ``setpriv`` with
``--pdeathsig=TERM`` so a node never outlives the Python process that started it (even
after SIGKILL); without setpriv, ``subprocess.Popen(user=...)`` is used.

k-NN engines: only ``lucene`` works.  The Maven Central k-NN zip has no JNI libraries, and
the first flush of a ``faiss`` or ``nmslib`` index -- including an hnsw field with no
``engine`` given, since the 2.19 default is faiss -- throws UnsatisfiedLinkError, which
kills the node.  Always set ``"engine": "lucene"``.  Its cosinesimil score is ``(1 + cos) / 2``.

CLI::

    python -m tests.support.opensearch fetch               # provision only (CI)
    python -m tests.support.opensearch start --nodes 2     # run until Ctrl-C/SIGTERM
    python -m tests.support.opensearch stop                # stop a running `start`
    python -m tests.support.opensearch engines             # which k-NN engines work

Python::

    from tests.support.opensearch import start_nodes
    with start_nodes(2) as nodes:
        urls = [n.url for n in nodes]
        nodes[1].stop()     # simulate a failed region
        nodes[1].start()    # bring it back (same ports, same data)
"""

from __future__ import annotations

from tests.support.opensearch.distribution import (
    DEFAULT_HEAP,
    DEFAULT_STATE_FILE,
    DEFAULT_USER,
    DIST_ARTIFACT,
    HOME_ENV,
    INSTALLED_STAMP,
    KNN_ARTIFACT,
    KNN_VERSION,
    OPENSEARCH_VERSION,
    PAINLESS_ARTIFACTS,
    PAINLESS_DESCRIPTOR,
    PAINLESS_POLICY,
    PROJECT_ROOT,
    USER_ENV,
    OpenSearchSetupError,
    OpenSearchStartError,
    default_home,
    distribution_installed,
    ensure_distribution,
    maven_fetch,
    missing_prerequisites,
)
from tests.support.opensearch.engines import (
    NATIVE_ENGINES,
    check_knn_engine,
    check_knn_engines,
    check_knn_engines_isolated,
    native_knn_libraries,
)
from tests.support.opensearch.nodes import (
    OpenSearchCluster,
    OpenSearchNode,
    free_port,
    http_json,
    start_nodes,
    stop_all,
    suite_node_dir,
)
from tests.support.opensearch.runas import ensure_user

__all__ = [
    "DEFAULT_HEAP",
    "DEFAULT_STATE_FILE",
    "DEFAULT_USER",
    "DIST_ARTIFACT",
    "HOME_ENV",
    "INSTALLED_STAMP",
    "KNN_ARTIFACT",
    "KNN_VERSION",
    "NATIVE_ENGINES",
    "OPENSEARCH_VERSION",
    "OpenSearchCluster",
    "OpenSearchNode",
    "OpenSearchSetupError",
    "OpenSearchStartError",
    "PAINLESS_ARTIFACTS",
    "PAINLESS_DESCRIPTOR",
    "PAINLESS_POLICY",
    "PROJECT_ROOT",
    "USER_ENV",
    "check_knn_engine",
    "check_knn_engines",
    "check_knn_engines_isolated",
    "default_home",
    "distribution_installed",
    "ensure_distribution",
    "ensure_user",
    "free_port",
    "http_json",
    "maven_fetch",
    "missing_prerequisites",
    "native_knn_libraries",
    "start_nodes",
    "stop_all",
    "suite_node_dir",
]
