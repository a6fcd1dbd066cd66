"""Fetching OpenSearch and its k-NN plugin from Maven Central, and installing them once."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

OPENSEARCH_VERSION = "2.19.1"
KNN_VERSION = "2.19.1.0"
DIST_ARTIFACT = f"org.opensearch.distribution.integ-test-zip:opensearch:{OPENSEARCH_VERSION}:zip"
KNN_ARTIFACT = f"org.opensearch.plugin:opensearch-knn:{KNN_VERSION}:zip"
# lang-painless is a module of the full distribution but absent from the
# integ-test zip; k-NN extends it.  Jars (from lang-painless-2.19.1.pom):
PAINLESS_ARTIFACTS = (
    f"org.opensearch.plugin:lang-painless:{OPENSEARCH_VERSION}:jar",
    f"org.opensearch.plugin:opensearch-scripting-painless-spi:{OPENSEARCH_VERSION}:jar",
    "org.antlr:antlr4-runtime:4.13.1:jar",
    "org.ow2.asm:asm:9.7:jar",
    "org.ow2.asm:asm-util:9.7:jar",
    "org.ow2.asm:asm-tree:9.7:jar",
    "org.ow2.asm:asm-commons:9.7:jar",
    "org.ow2.asm:asm-analysis:9.7:jar",
)
PAINLESS_DESCRIPTOR = f"""\
description=An easy, safe and fast scripting language for OpenSearch
version={OPENSEARCH_VERSION}
name=lang-painless
classname=org.opensearch.painless.PainlessPlugin
java.version=11
opensearch.version={OPENSEARCH_VERSION}
extended.plugins=
has.native.controller=false
"""
#: The analyzers every OpenSearch distribution but the integ-test one has (english, porter_stem, ...): the
#: histories' keyword search analyses its words with ``english``.
ANALYSIS_COMMON_ARTIFACTS = (f"org.opensearch.plugin:analysis-common:{OPENSEARCH_VERSION}:jar",)
ANALYSIS_COMMON_DESCRIPTOR = f"""\
description=Adds "built in" analyzers to OpenSearch.
version={OPENSEARCH_VERSION}
name=analysis-common
classname=org.opensearch.analysis.common.CommonAnalysisPlugin
java.version=11
opensearch.version={OPENSEARCH_VERSION}
extended.plugins=lang-painless
has.native.controller=false
"""
PAINLESS_POLICY = """\
grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";
  // needed to find the classloader to load whitelisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
"""

HOME_ENV = "MEMORY_PLUGIN_OPENSEARCH_HOME"
USER_ENV = "MEMORY_PLUGIN_OPENSEARCH_USER"
DEFAULT_USER = "opensearch"
DEFAULT_HEAP = "512m"
INSTALLED_STAMP = ".memory_plugin-installed"
PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_STATE_FILE = PROJECT_ROOT / ".cache" / "opensearch-nodes.json"

_install_lock = threading.Lock()


class OpenSearchSetupError(RuntimeError):
    """Fetching, unpacking or installing the distribution failed."""


class OpenSearchStartError(RuntimeError):
    """A node did not start (or did not become green) in time."""


def log(msg: str) -> None:
    print(f"[opensearch_nodes] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- prerequisites


def distribution_installed(home: Path | str | None = None) -> bool:
    """True when the cached install (OpenSearch + lang-painless + k-NN) is complete."""
    home = Path(home).expanduser() if home else default_home()
    return (home / INSTALLED_STAMP).is_file() and _knn_installed(home)


def missing_prerequisites(home: Path | str | None = None) -> list[str]:
    """Missing tools: ``java`` always needed, ``mvn`` only until the distribution is cached."""
    missing = [] if _java_home() else ["java"]
    if shutil.which("mvn") is None and not distribution_installed(home):
        missing.append("mvn")
    return missing


def _java_home() -> str | None:
    for var in ("OPENSEARCH_JAVA_HOME", "JAVA_HOME"):
        value = os.environ.get(var)
        if value and Path(value, "bin", "java").exists():
            return value
    java = shutil.which("java")
    if java:
        return str(Path(os.path.realpath(java)).parent.parent)
    return None


def default_home() -> Path:
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".cache" / "memory_plugin" / f"opensearch-{OPENSEARCH_VERSION}"


# --------------------------------------------------------------------------- fetch / install


def run(cmd: Sequence[str], *, what: str, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    try:
        proc = subprocess.run(
            list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=timeout
        )
    except FileNotFoundError as exc:
        raise OpenSearchSetupError(f"{what}: command not found: {cmd[0]!r} ({exc})") from exc
    except subprocess.TimeoutExpired as exc:
        raise OpenSearchSetupError(f"{what}: timed out after {timeout}s: {' '.join(cmd)}") from exc
    if proc.returncode != 0:
        raise OpenSearchSetupError(
            f"{what} failed (exit {proc.returncode}).\nCommand: {' '.join(cmd)}\nOutput:\n{proc.stdout.strip()[-6000:]}"
        )
    return proc.stdout


def maven_fetch(artifact: str, dest: Path) -> Path:
    """Copy ``G:A:V:type`` from Maven Central (via ``~/.m2``) into *dest*; return the file."""
    group, art, version, packaging = artifact.split(":")
    target = dest / f"{art}-{version}.{packaging}"
    if target.is_file() and target.stat().st_size > 0:
        return target
    if shutil.which("mvn") is None:
        raise OpenSearchSetupError("Maven ('mvn') is not on PATH; it is needed to fetch " + artifact)
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-U",
        "-Dstyle.color=never",
        "dependency:copy",
        f"-Dartifact={artifact}",
        f"-DoutputDirectory={dest}",
    ]
    out = run(cmd, what=f"Fetching {artifact} from Maven Central")
    if not target.is_file():
        raise OpenSearchSetupError(
            f"Fetching {artifact}: Maven succeeded but {target} is missing.\nCommand: {' '.join(cmd)}\nOutput:\n{out}"
        )
    return target


def _knn_installed(home: Path) -> bool:
    return (home / "plugins" / "opensearch-knn" / "plugin-descriptor.properties").is_file()


def _install_module(
    home: Path, downloads: Path, name: str, artifacts: Sequence[str], descriptor: str, policy: str | None = None
) -> bool:
    """A module from its Maven Central jars, unless installed (atomically: a node started meanwhile sees all or
    none); whether it was new."""
    module = home / "modules" / name
    if (module / "plugin-descriptor.properties").is_file():
        return False
    tmp = home / "modules" / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for artifact in artifacts:
        shutil.copy2(maven_fetch(artifact, downloads), tmp)
    (tmp / "plugin-descriptor.properties").write_text(descriptor)
    if policy is not None:
        (tmp / "plugin-security.policy").write_text(policy)
    make_world_readable(tmp)
    tmp.rename(module)
    return True


def install_modules(home: Path, downloads: Path) -> None:
    """The modules the integ-test distribution lacks: painless, and the common analyzers.

    One added to an installed home changes its stamp, so that the runtime copies made of it are made again.
    """
    added = [
        _install_module(home, downloads, "lang-painless", PAINLESS_ARTIFACTS, PAINLESS_DESCRIPTOR, PAINLESS_POLICY),
        _install_module(home, downloads, "analysis-common", ANALYSIS_COMMON_ARTIFACTS, ANALYSIS_COMMON_DESCRIPTOR),
    ]
    stamp = home / INSTALLED_STAMP
    if any(added) and stamp.is_file():
        installed = json.loads(stamp.read_text())
        installed["modules"] = sorted(
            path.name for path in (home / "modules").iterdir() if not path.name.startswith(".")
        )
        fresh = stamp.with_name(stamp.name + ".tmp")  # a new file: runtime copies hard-link the old one
        fresh.write_text(json.dumps(installed))
        fresh.replace(stamp)


def ensure_distribution(home: Path | str | None = None) -> Path:
    """Fetch, unpack and install OpenSearch + lang-painless + k-NN once; return OPENSEARCH_HOME.

    Idempotent: a stamp file marks a complete install; a half-finished unpack is redone.
    """
    home = Path(home).expanduser().resolve() if home else default_home()
    stamp = home / INSTALLED_STAMP
    with _install_lock, file_lock(home.parent / f".{home.name}.lock"):
        if stamp.is_file() and _knn_installed(home):
            install_modules(home, home.parent / "downloads")  # a module added since the install
            return home
        missing = missing_prerequisites(home)
        if missing:
            raise OpenSearchSetupError(f"missing prerequisites: {', '.join(missing)} (need Java 17+ and Maven)")
        t0 = time.monotonic()
        downloads = home.parent / "downloads"
        dist_zip = maven_fetch(DIST_ARTIFACT, downloads)
        knn_zip = maven_fetch(KNN_ARTIFACT, downloads)
        if not (home / "bin" / "opensearch").is_file():
            staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=home.parent))
            try:
                with zipfile.ZipFile(dist_zip) as zf:
                    zf.extractall(staging)
                    # zipfile drops unix permissions; restore them
                    for info in zf.infolist():
                        mode = (info.external_attr >> 16) & 0o777
                        if mode:
                            os.chmod(staging / info.filename, mode)
                unpacked = staging / f"opensearch-{OPENSEARCH_VERSION}"
                for script in (unpacked / "bin").iterdir():
                    script.chmod(0o755)
                shutil.rmtree(home, ignore_errors=True)
                unpacked.rename(home)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        install_modules(home, downloads)
        if not _knn_installed(home):
            shutil.rmtree(home / "plugins" / "opensearch-knn", ignore_errors=True)
            env = base_env()
            run(
                [str(home / "bin" / "opensearch-plugin"), "install", "--batch", knn_zip.resolve().as_uri()],
                what="Installing the k-NN plugin",
                env=env,
            )
        make_world_readable(home)  # config/* ships as 0660; other users (the node user) must read it
        stamp.write_text(json.dumps({"opensearch": OPENSEARCH_VERSION, "knn": KNN_VERSION, "time": time.time()}))
        log(f"OpenSearch {OPENSEARCH_VERSION} + k-NN ready in {home} ({time.monotonic() - t0:.1f}s)")
        return home


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:  # someone else's lock file: a read-only fd can still flock
        fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def make_world_readable(path: Path) -> None:
    for root, dirs, files in os.walk(path):
        for d in dirs:
            p = os.path.join(root, d)
            os.chmod(p, os.stat(p).st_mode | 0o755)
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o644)


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    java_home = _java_home()
    if java_home:
        env["OPENSEARCH_JAVA_HOME"] = java_home
    env.pop("OPENSEARCH_PATH_CONF", None)
    env.pop("OPENSEARCH_JAVA_OPTS", None)
    return env
