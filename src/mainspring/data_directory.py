"""The user's data directory for mainspring, where conversations, keys and durable runs live."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["data_dir"]


def data_dir(environ: Mapping[str, str] | None = None, *, strict: bool = False) -> Path:
    """``$MAINSPRING_DATA_DIR``, else ``$XDG_DATA_HOME/mainspring``, else
    ``$HOME/.local/share/mainspring``. Not created here.

    When the environment names none of them, the account's home directory is used, unless
    ``strict``: then it is a ``ValueError`` (a process whose environment names no data
    directory, such as the coding tools' shell, must not find one; durable runs, whose
    database holds approvals, ask for it strictly).
    """
    env = os.environ if environ is None else environ
    chosen = env.get("MAINSPRING_DATA_DIR")
    if chosen:
        return Path(chosen).expanduser()
    base = env.get("XDG_DATA_HOME") or (
        os.path.join(env["HOME"], ".local", "share") if env.get("HOME") else None
    )
    if base is None:
        if strict:
            raise ValueError(
                "no data directory: set MAINSPRING_DATA_DIR, XDG_DATA_HOME or HOME, or give "
                "the database URL (--database, MAINSPRING_DATABASE_URL)"
            )
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "mainspring"
