"""Approval lines of session files, sealed to their file with a keyed digest.

A remembered approval is written as one line ``{"type": "approval", "tool", "remember",
"arguments", "argument", "pattern", "digest"}``. ``digest`` is an HMAC-SHA256, under a key
kept in the data directory (``DATA/approval.key``, 32 random bytes, mode ``0600``,
created on first use), of the line's fields and of the file's own header line. So a line
added by hand, edited, or copied from another session file does not verify: reading
refuses it with a warning and the approval is not remembered. A line of an older format
(no digest) is refused the same way. Whoever can read the key can forge lines: it is as
private as the session files themselves.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from .approval_scopes import ArgumentScope
from .data_directory import data_dir

__all__ = ["ApprovalLineError", "approval_key", "decode_approval", "encode_approval"]

KEY_FILE = "approval.key"

_keys: dict[Path, bytes] = {}


class ApprovalLineError(ValueError):
    """An approval line that is refused; the message says why."""


def approval_key(directory: Path | None = None) -> bytes:
    """The sealing key of ``directory`` (default: the data directory), made on first use.

    Raises ``OSError`` when it can be neither read nor created, ``ValueError`` when it
    holds something other than a key.
    """
    where = (directory or data_dir()) / KEY_FILE
    key = _keys.get(where)
    if key is not None:
        return key
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        if where.stat().st_mode & 0o077:
            os.chmod(where, 0o600)  # as private as the session files
        key = bytes.fromhex(where.read_text(encoding="ascii").strip())
    else:
        key = secrets.token_bytes(32)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(key.hex() + "\n")
    if len(key) < 16:
        raise ValueError(f"the approval key {where} is too short; remove it to make a new one")
    _keys[where] = key
    return key


def _digest(header: bytes, fields: list[Any]) -> str:
    message = json.dumps(
        [hashlib.sha256(header).hexdigest(), *fields], sort_keys=True, separators=(",", ":")
    )
    return hmac.new(approval_key(), message.encode("utf-8"), hashlib.sha256).hexdigest()


def _fields(tool: str, arguments: Any) -> list[Any]:
    if arguments is None:
        return [tool, "tool", None, None, None]
    if isinstance(arguments, ArgumentScope):
        return [tool, arguments.kind, arguments.others, arguments.argument, arguments.pattern]
    return [tool, "call", arguments, None, None]


def encode_approval(header: bytes, tool: str, arguments: Any) -> dict[str, Any]:
    """The line of a remembered approval (``Remembered`` fields) in the file of ``header``.

    ``header`` is the file's first line, without its newline.
    """
    fields = _fields(tool, arguments)
    names = ("tool", "remember", "arguments", "argument", "pattern")
    return {
        "type": "approval",
        **dict(zip(names, fields, strict=True)),
        "digest": _digest(header, fields),
    }


def decode_approval(header: bytes, record: dict[str, Any]) -> tuple[str, Any]:
    """``(tool, arguments)`` of a verified approval line; :class:`ApprovalLineError` if not.

    ``arguments`` is ``None`` (every call), an :class:`ArgumentScope`, or the exact
    arguments, as ``Remembered`` holds them.
    """
    tool, remember = record.get("tool"), record.get("remember")
    arguments, argument, pattern = (
        record.get("arguments"),
        record.get("argument"),
        record.get("pattern"),
    )
    digest = record.get("digest")
    if not isinstance(digest, str):
        raise ApprovalLineError("it carries no digest (written by hand or by an older version)")
    try:
        expected = _digest(header, [tool, remember, arguments, argument, pattern])
    except (OSError, ValueError) as error:
        raise ApprovalLineError(f"the approval key cannot be read: {error}") from None
    if not hmac.compare_digest(digest, expected):
        raise ApprovalLineError("its digest does not match (written by hand, edited, or copied)")
    if not isinstance(tool, str):
        raise ApprovalLineError("it names no tool")
    if remember == "tool":
        return tool, None
    if remember == "call":
        return tool, arguments
    if remember in ("prefix", "glob"):
        try:
            return tool, ArgumentScope(remember, argument, pattern, arguments)  # type: ignore[arg-type]
        except (TypeError, ValueError) as error:
            raise ApprovalLineError(str(error)) from None
    raise ApprovalLineError(f"unknown scope {remember!r}")
