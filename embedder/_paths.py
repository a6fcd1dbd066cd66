"""Shared bits kept out of build_default so importing the package never imports the builder."""

from __future__ import annotations

import os
from pathlib import Path


class BuildError(RuntimeError):
    """The default model cannot be built here; the message says what to do."""


def default_model_dir() -> Path:
    """Where the default model lives: $MEMORY_PLUGIN_MODEL_DIR or the user cache."""
    env = os.environ.get("MEMORY_PLUGIN_MODEL_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "memory_plugin" / "models" / "multilingual-e5-small"
