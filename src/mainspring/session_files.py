"""One session file, one conversation, one writer at a time.

:func:`check_session_path`, called by the ``Agent`` constructor when
``settings.session_path`` is set, refuses (:class:`~mainspring.sessions.SessionConflictError`)
a file that holds another conversation than the agent's transcript, or that another agent
is writing now, and remembers what it found (a :class:`Claim`). The ``session_writer``
plugin holds the file's advisory lock (:func:`try_lock`) while a run writes, and checks at
each run's start that the file is still as the agent last saw it.
"""

from __future__ import annotations

import errno
import os
import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .logs import get_logger
from .sessions import SessionAccessError, SessionConflictError, parse_session

if sys.platform != "win32":
    import fcntl

__all__ = [
    "Claim",
    "FileState",
    "check_session_path",
    "claim_for",
    "file_state",
    "inspect_session",
    "try_lock",
]

log = get_logger("mainspring.sessions")

FileState = tuple[int, int, int, int]
"""``(st_dev, st_ino, st_size, st_mtime_ns)``: a file's identity and version."""


def file_state(stat: os.stat_result) -> FileState:
    """The :data:`FileState` of ``stat``."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def try_lock(fd: int) -> bool:
    """Take the advisory exclusive lock of the open file ``fd``; ``False`` if another
    holder has it (any process, or another open of the file in this one)."""
    if sys.platform == "win32":  # no advisory locks: writers are not kept apart there
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as error:  # a file system without locks
        log.warning("session_lock_unavailable", error=str(error))
    return True


@dataclass(frozen=True)
class Claim:
    """What an agent found in its session file: the file's state (``None``: absent or
    empty), how many leading transcript entries it holds (``recorded``), and the last of
    them as the agent holds it (``last``, compared by identity)."""

    path: str
    state: FileState | None
    recorded: int
    last: Any


_claims: weakref.WeakKeyDictionary[Any, Claim] = weakref.WeakKeyDictionary()


def inspect_session(path: str, raw: bytes, stat: os.stat_result, messages: Sequence[Any]) -> Claim:
    """The :class:`Claim` of an agent with transcript ``messages`` on the file ``path``,
    read as ``raw`` with ``stat``: a non-empty file must hold exactly that transcript.

    Raises :class:`SessionConflictError` when it holds another conversation, and
    :class:`SessionFormatError` when it is malformed.
    """
    where = os.path.abspath(path)
    if not raw:
        return Claim(where, None, 0, None)
    session = parse_session(path, raw)
    if stat.st_size != len(raw):
        raise SessionConflictError(path, "it changed while it was being read")
    if list(session.messages) != list(messages):
        raise SessionConflictError(
            path,
            "it already holds a conversation, and this agent's transcript is not that "
            f"conversation; one session file holds one conversation: use "
            f"Agent.from_session({path!r}) to continue it, or choose a new session_path",
        )
    recorded = len(messages) - session.synthesized
    return Claim(where, file_state(stat), recorded, messages[recorded - 1] if recorded else None)


def check_session_path(
    owner: object, path: str | os.PathLike[str], messages: Sequence[Any]
) -> None:
    """Check that ``owner``, an agent being built with transcript ``messages``, may record
    to the session file ``path``, and remember what it found for the session writer.

    A file that is absent or empty can be started. A non-empty file can only be continued,
    by an agent whose transcript is what the file holds (:meth:`Agent.from_session` builds
    one). Either way the file must be writable, or for an absent file its directory (or
    the nearest existing ancestor, where the missing directories would be made). Raises
    :class:`SessionConflictError` when the file holds another conversation or another
    agent is writing it now, :class:`SessionFormatError` when it is malformed, and
    :class:`SessionAccessError` (an ``OSError``) when it cannot be read or written.
    Nothing is created or written.
    """
    name = os.fspath(path)
    try:
        handle = open(name, "rb")  # noqa: SIM115 - closed below, after the lock probe
    except (FileNotFoundError, NotADirectoryError):
        _check_creatable(name)
        _claims[owner] = Claim(os.path.abspath(name), None, 0, None)
        return
    except OSError as error:
        raise SessionAccessError(name, "read", error) from error
    with handle:
        try:
            os.close(os.open(name, os.O_WRONLY | os.O_APPEND))  # opening writes nothing
        except OSError as error:
            raise SessionAccessError(name, "written", error) from error
        if not try_lock(handle.fileno()):
            raise SessionConflictError(name, "another agent is writing it right now")
        raw = handle.read()
        stat = os.fstat(handle.fileno())
    _claims[owner] = inspect_session(name, raw, stat, messages)


def _check_creatable(name: str) -> None:
    """Raise :class:`SessionAccessError` unless the absent file ``name`` can be created:
    its nearest existing ancestor is a directory this process may write to."""
    directory = os.path.dirname(os.path.abspath(name))
    while not os.path.exists(directory):
        directory = os.path.dirname(directory)
    if not os.path.isdir(directory):
        raise SessionAccessError(name, "written", NotADirectoryError(errno.ENOTDIR, directory))
    if not os.access(directory, os.W_OK | os.X_OK):
        why = f"the directory {directory} is not writable"
        raise SessionAccessError(name, "written", PermissionError(errno.EACCES, why), why)


def claim_for(owner: object, path: str) -> Claim | None:
    """The claim :func:`check_session_path` made for ``owner`` on ``path`` (absolute)."""
    claim = _claims.get(owner)
    return claim if claim is not None and claim.path == path else None
