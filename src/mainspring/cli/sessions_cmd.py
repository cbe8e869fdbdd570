"""Conversations kept in the user's data directory: where ``run`` and ``chat`` record,
``-c/--continue``, and the ``sessions`` command (``list``, ``show ID``).

By default every ``run`` and ``chat`` records its conversation to a new session file in
``DATA/sessions/`` (:func:`sessions_dir`), named ``YYYYmmdd-HHMMSS-XXXXXX.jsonl``; its name
without ``.jsonl`` is the conversation's id. ``--session`` and ``sessions show`` name a
conversation the same way (:func:`find_session`): an id, the unique start of one,
``latest``, or a file (a path: it contains ``/`` or ends in ``.jsonl``); ``--session``
resumes it and records to it. ``--no-session`` records nothing, and ``-c/--continue``
resumes the most recently written conversation of that directory. When the directory
cannot be written, the run goes on without recording and says so once.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import secrets
from pathlib import Path
from typing import Any, TextIO

from ..data_directory import data_dir
from ..sessions import SessionAccessError, SessionFormatError, read_session
from .errors import usage_error

__all__ = [
    "add_session_options",
    "add_sessions_command",
    "data_dir",
    "find_session",
    "session_for",
    "sessions_command",
    "sessions_dir",
]

_TITLE = 60
"""Characters of a conversation's first prompt shown in the list."""


def sessions_dir(environ: dict[str, str] | None = None) -> Path:
    """Where conversations are kept: ``DATA/sessions`` (see :func:`data_dir`)."""
    return data_dir(environ) / "sessions"


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """``--session FILE``, ``-c/--continue`` and ``--no-session`` (mutually exclusive)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--session",
        default=None,
        metavar="ID|latest|FILE",
        help="resume a kept conversation (its id, the unique start of one, or latest) or "
        "the session FILE (a path with / or ending in .jsonl; made if absent), and record "
        "the run to it",
    )
    where.add_argument(
        "-c",
        "--continue",
        dest="continue_session",
        action="store_true",
        help="continue the most recent conversation (see: mainspring sessions)",
    )
    where.add_argument(
        "--no-session",
        action="store_true",
        help="do not record this conversation (by default it is kept in the data directory)",
    )


def add_sessions_command(commands: Any) -> None:
    """``mainspring sessions [list | show ID] [--json] [--limit N]``."""
    sessions = commands.add_parser(
        "sessions", help="list the kept conversations, or show one (sessions show ID)"
    )
    sessions.add_argument("action", nargs="?", default="list", choices=("list", "show"))
    sessions.add_argument(
        "id",
        nargs="?",
        default=None,
        help="with show: an id, the unique start of one, latest, or a file",
    )
    sessions.add_argument("--json", action="store_true", help="print JSON")
    sessions.add_argument("--limit", type=int, default=20, help="list at most N (newest first)")


def _files(directory: Path) -> list[Path]:
    """The session files of ``directory``, most recently written first."""
    try:
        found = [path for path in directory.iterdir() if path.suffix == ".jsonl"]
    except OSError:
        return []

    def written(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(found, key=lambda path: (written(path), path.name), reverse=True)


def _writable(directory: Path) -> bool:
    """Whether files can be made in ``directory`` (made now, with its parents, if absent)."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK | os.X_OK)


def session_for(args: argparse.Namespace, warn: TextIO) -> str | None:
    """The session file a ``run`` or ``chat`` records to (``None``: none).

    ``--session KEY``: the conversation :func:`find_session` finds (a ``ValueError`` for
    an id that names none). ``-c``: the same as ``--session latest``. ``--no-session``:
    ``None``. Otherwise a new file in :func:`sessions_dir`, or ``None`` with a warning on
    ``warn`` when it is not writable.
    """
    if getattr(args, "session", None):
        return str(find_session(args.session))
    if getattr(args, "no_session", False):
        return None
    directory = sessions_dir()
    if getattr(args, "continue_session", False):
        return str(find_session(LATEST))
    if not _writable(directory):
        print(
            f"mainspring: warning: {directory} is not writable; this conversation is not "
            "kept (--session FILE records it elsewhere)",
            file=warn,
            flush=True,
        )
        return None
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return str(directory / f"{stamp}-{secrets.token_hex(3)}.jsonl")


def _summary(path: Path) -> dict[str, Any]:
    """One row of the list: id, file, when written, model, messages, first prompt."""
    row: dict[str, Any] = {
        "id": path.stem,
        "path": str(path),
        "modified": datetime.datetime.fromtimestamp(path.stat().st_mtime).isoformat(
            timespec="seconds"
        ),
    }
    try:
        session = read_session(path)
    except (SessionFormatError, SessionAccessError) as error:
        return {**row, "error": str(error)}
    first = next((m.text for m in session.messages if getattr(m, "role", "") == "user"), "")
    return {
        **row,
        "model": session.model,
        "messages": len(session.messages),
        "title": " ".join(first.split()),
    }


LATEST = "latest"
"""The key that names the most recently written conversation."""


def find_session(key: str) -> Path:
    """The session file ``key`` names: a path (it contains ``/`` or ends in ``.jsonl``;
    it need not exist), ``latest`` (the most recently written conversation), an id, or the
    unique start of an id in :func:`sessions_dir`. Raises ``ValueError`` saying why
    ``key`` names no conversation, or more than one."""
    if "/" in key or os.sep in key or key.endswith(".jsonl"):
        return Path(key)
    directory = sessions_dir()
    files = _files(directory)
    if key == LATEST:
        if not files:
            raise ValueError(f"no conversation yet in {directory}")
        return files[0]
    exact = [path for path in files if path.stem == key]
    matches = exact or [path for path in files if key and path.stem.startswith(key)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ValueError(
            f"no conversation {key!r} in {directory} (mainspring sessions lists them; a "
            "file is named by a path: ./NAME.jsonl)"
        )
    raise ValueError(f"{key!r} names {len(matches)} conversations; give more of the id")


def _show(path: Path, as_json: bool) -> None:
    session = read_session(path)
    if as_json:
        from ..message_json import encode_message

        data = {
            "id": path.stem,
            "path": str(path),
            "model": session.model,
            "system_prompt": session.system_prompt,
            "messages": [encode_message(message) for message in session.messages],
        }
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    print(f"# {path.stem}  ({session.model}, {path})")
    for message in session.messages:
        role = getattr(message, "role", "?")
        if role == "assistant":
            if message.text:
                print(f"assistant: {message.text}")
            for call in getattr(message, "tool_calls", ()):
                arguments = json.dumps(call.arguments, ensure_ascii=False, default=str)
                print(f"  → {call.name} {arguments}")
        elif role == "tool_result":
            lines = message.text.strip().splitlines() or [""]
            outcome = "error" if message.is_error else "ok"
            print(f"  • {message.tool_name} {outcome}: {lines[0][:100]}")
        else:
            print(f"{role}: {getattr(message, 'text', '')}")


def sessions_command(args: argparse.Namespace) -> int:
    """``sessions``/``sessions list``: the newest conversations; ``sessions show ID``: one
    conversation. Returns the exit code (2 for an unknown or unreadable conversation)."""
    try:
        if args.action == "show":
            if not args.id:
                raise ValueError("use: mainspring sessions show ID")
            _show(find_session(args.id), args.json)
            return 0
    except (ValueError, OSError) as error:
        return usage_error(error)
    rows = [_summary(path) for path in _files(sessions_dir())[: max(0, args.limit)]]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no conversations yet in {sessions_dir()}")
    for row in rows:
        when = row["modified"].replace("T", " ")[:16]
        if "error" in row:
            print(f"{row['id']}  {when}  (unreadable: {row['error']})")
            continue
        title = row["title"]
        title = title if len(title) <= _TITLE else title[: _TITLE - 1] + "…"
        print(f"{row['id']}  {when}  {row['model']}  {row['messages']} messages  {title}")
    return 0
