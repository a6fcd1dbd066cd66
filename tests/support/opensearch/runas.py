"""Running nodes as an unprivileged user when this process is root (OpenSearch refuses root)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.opensearch.distribution import (
    DEFAULT_USER,
    INSTALLED_STAMP,
    USER_ENV,
    OpenSearchSetupError,
    file_lock,
    make_world_readable,
)

# --------------------------------------------------------------------------- root handling


def running_as_root() -> bool:
    return os.geteuid() == 0


def ensure_user(name: str | None = None) -> pwd.struct_passwd:
    """Return (creating if needed) the unprivileged user that runs nodes when we are root."""
    name = name or os.environ.get(USER_ENV) or DEFAULT_USER
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    attempts = [
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ],
        ["adduser", "-S", "-D", "-H", "-s", "/sbin/nologin", name],  # busybox/alpine
    ]
    errors = []
    for cmd in attempts:
        if shutil.which(cmd[0]) is None:
            continue
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)  # also covers a concurrent creator
        errors.append(f"{' '.join(cmd)} -> exit {proc.returncode}: {proc.stdout.strip()}")
    raise OpenSearchSetupError(
        f"running as root and could not create unprivileged user {name!r} for OpenSearch "
        f"(OpenSearch refuses to run as root): {'; '.join(errors) or 'no useradd/adduser'}"
    )


def _world_traversable(path: Path) -> bool:
    """True when every ancestor is o+x and the path itself o+rx (so any user can read it)."""
    path = path.resolve()
    for p in [path, *path.parents]:
        mode = p.stat().st_mode
        if not mode & 0o001:
            return False
    return bool(path.stat().st_mode & 0o004)


def runtime_home(home: Path) -> Path:
    """When root: a copy of *home* the unprivileged node user can read (hard links when possible)."""
    if _world_traversable(home):
        return home
    make_world_readable(home)
    stamp = (home / INSTALLED_STAMP).read_text()
    mirror = Path(tempfile.gettempdir()) / f"memory_plugin-{home.name}-runtime"  # one mirror per home
    with file_lock(Path(tempfile.gettempdir()) / f".memory_plugin-{home.name}-runtime.lock"):
        if (mirror / INSTALLED_STAMP).is_file() and (mirror / INSTALLED_STAMP).read_text() == stamp:
            return mirror
        staging = Path(tempfile.mkdtemp(prefix=".mirror-", dir=mirror.parent))
        target = staging / "home"

        def link_or_copy(src: str, dst: str) -> None:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)

        shutil.copytree(home, target, copy_function=link_or_copy, symlinks=True)
        for p in [target, *target.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        staging.chmod(0o755)
        shutil.rmtree(mirror, ignore_errors=True)
        target.rename(mirror)
        shutil.rmtree(staging, ignore_errors=True)
        return mirror


def chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            os.lchown(os.path.join(root, n), uid, gid)
