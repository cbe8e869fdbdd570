"""The approval key: who may decide a durable run's calls.

A decision is a message any process that can reach the runs' database could send; the
model's own tools could be such a process. So every decision carries an HMAC-SHA256,
under a secret **approval key**, of exactly what it decides (run, call id, digest of the
arguments, decision, reason, remember), and a run's approver ignores a decision whose MAC
does not verify under the key its worker was started with.

The key is one per database, in a file of its own, 0600 in a 0700 directory, **outside
the data directory** (which holds the SQLite database a tool might be allowed to read):

- ``$MAINSPRING_APPROVAL_KEY_FILE`` when set;
- else ``$XDG_CONFIG_HOME/mainspring/approval-keys/<id>.key``, else
  ``$HOME/.config/mainspring/approval-keys/<id>.key``, where ``<id>`` is derived from the
  database URL.

There is no fallback to the account's home directory from the password database: a
process whose environment has none of these variables (the coding tools' shell) has no
key to find. A worker creates the key on its first start; ``mainspring runs approve``
only reads it, and refuses to send a decision without it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MissingApprovalKey", "approval_key_path", "load_approval_key", "sign", "verify"]


class MissingApprovalKey(ValueError):
    """The approval key cannot be located or read."""


def approval_key_path(url: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where the approval key of the database ``url`` is kept (see the module)."""
    env = os.environ if environ is None else environ
    chosen = env.get("MAINSPRING_APPROVAL_KEY_FILE")
    if chosen:
        return Path(chosen).expanduser()
    config = env.get("XDG_CONFIG_HOME") or (
        os.path.join(env["HOME"], ".config") if env.get("HOME") else None
    )
    if config is None:
        raise MissingApprovalKey(
            "no approval key location: set MAINSPRING_APPROVAL_KEY_FILE, XDG_CONFIG_HOME or HOME"
        )
    name = hashlib.sha256(url.encode()).hexdigest()[:16]
    return Path(config) / "mainspring" / "approval-keys" / f"{name}.key"


def load_approval_key(url: str, *, create: bool = False) -> bytes:
    """The approval key of ``url``; made (0600, directories 0700) when ``create`` and
    missing. :class:`MissingApprovalKey` when it cannot be found or read."""
    path = approval_key_path(url)
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another worker made it first
        else:
            with os.fdopen(descriptor, "w") as file:
                file.write(secrets.token_hex(32) + "\n")
    try:
        key = path.read_text().strip()
    except OSError as error:
        raise MissingApprovalKey(
            f"cannot read the approval key {path} ({error.strerror or error}); decisions "
            "are sent from the account that runs the workers, with their key"
        ) from None
    if len(key) < 32:
        raise MissingApprovalKey(f"the approval key {path} is too short (at least 32 chars)")
    return key.encode()


def _signed_part(run_id: str, message: Mapping[str, Any]) -> bytes:
    fields = [run_id] + [
        message.get(name)
        for name in ("tool_call_id", "arguments_sha256", "decision", "reason", "remember")
    ]
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()


def sign(key: bytes, run_id: str, message: Mapping[str, Any]) -> str:
    """The MAC of a decision for ``run_id``."""
    return hmac.new(key, _signed_part(run_id, message), hashlib.sha256).hexdigest()


def verify(key: bytes, run_id: str, message: Mapping[str, Any]) -> bool:
    """Whether ``message`` carries a valid MAC for ``run_id`` under ``key``."""
    mac = message.get("mac")
    if not isinstance(mac, str):
        return False
    return hmac.compare_digest(mac, sign(key, run_id, message))
