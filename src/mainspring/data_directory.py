"""The user's data directory for mainspring, where conversations, keys and durable runs live."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["data_dir"]


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$MAINSPRING_DATA_DIR``, else ``$XDG_DATA_HOME/mainspring``, else
    ``~/.local/share/mainspring``. Not created here."""
    env = os.environ if environ is None else environ
    chosen = env.get("MAINSPRING_DATA_DIR")
    if chosen:
        return Path(chosen).expanduser()
    base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "mainspring"
