"""An older revision's code beside this tree's, for the benchmarks' ``--baseline``: same machine, same run."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def archived(revision: str, *paths: str) -> Iterator[Path]:
    """A temporary folder holding ``paths`` as they were at git ``revision`` (``PYTHONPATH`` it to run that code)."""
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as checkout:
        archive = subprocess.run(["git", "archive", revision, *paths], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", checkout], input=archive.stdout, check=True)
        yield Path(checkout)
