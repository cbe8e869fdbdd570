"""Built-in: records the transcript to a JSONL session file (``settings.session_path``).

Inactive unless ``settings.session_path`` is set (``Agent.from_session`` sets it). See
:mod:`mainspring.sessions` for the format and for reading. The rules of writing:

- **When.** A new file gets the header and the transcript so far at the run's
  ``agent_start``; then each message is appended at its ``message_end`` (only messages
  kept in the transcript: a failed retry attempt is not) and each compaction at its
  ``compaction_end``. Lines are written whole with unbuffered writes, so by the time a
  listener returns ``wait_for_idle()`` means "on disk".
- **Private.** A file the writer creates has mode ``0600`` and the directories it creates
  ``0700``, whatever the umask; an existing file it writes to loses any group and other
  permissions.
- **Nothing lost, nothing spliced.** Before writing, a last line without its newline is
  completed when it is a whole JSON object and cut off (with a warning) only when it is
  not: a crash mid-write. Entries of the transcript that the file lacks (the results
  reading synthesized for an interrupted tool batch, or messages a failed write missed)
  are written first.
- **One writer.** During each run the writer holds an advisory exclusive lock
  (``flock``) on the file, from ``agent_start`` to ``agent_end``. At ``agent_start`` the
  file must be as this agent last saw it (when it was built, or when it last wrote), and
  the transcript must still continue what the file holds. Otherwise, or when another agent
  holds the lock, the writer raises :class:`~mainspring.sessions.SessionConflictError` and
  the run fails before anything is sent: the other writer's conversation is never
  spliced with this one. That is the only way the writer fails a run.
- **Approvals sealed.** Each approval remembered during a run is one line sealed to the
  file's header with a keyed digest (:mod:`mainspring.session_approvals`). When the key
  can be neither read nor made, the approval is not written (logged at ERROR): the
  session goes on, and a resumed one does not remember it.
- **Never fails a run otherwise.** Values that are not JSON-able are described
  (:func:`~mainspring.sessions.encode_message`). A write that fails (a full disk, a
  removed directory) is logged at ERROR with the path, the partial line is cut off, and
  the agent writes nothing more to the file during that run; its next run first writes
  what was missed (``compaction`` line included), so the file never has a hole.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import weakref
from dataclasses import dataclass
from typing import Any

from ..contract.markers import hookimpl, observes_when
from ..logs import get_logger
from ..session_approvals import encode_approval
from ..session_files import FileState, claim_for, file_state, inspect_session, try_lock
from ..sessions import (
    SessionConflictError,
    SessionFormatError,
    encode_message,
    header_record,
)

__all__ = ["on_event"]

CAPABILITIES = ("observe",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""

log = get_logger("mainspring.sessions")

_CHUNK = 1 << 16
_UNSEEN = (-1, -1, -1, -1)  # the file was never inspected by this agent


@dataclass(eq=False)
class _Writer:
    """One agent's writing to one file."""

    path: str
    state: FileState | None = _UNSEEN  # as this agent last saw it; None: absent or empty
    recorded: int = 0  # leading transcript entries the file holds
    last: Any = None  # the last of them (identity)
    file: io.FileIO | None = None  # open and locked during a run
    closer: weakref.finalize[Any, Any] | None = None
    failed: bool = False  # a write failed: nothing more this run, catch up next run
    missed_compaction: bool = False
    approvals: int = 0
    """How many of the agent's remembered approvals are in the file."""
    header: bytes = b""
    """The file's header line (approval lines are sealed to it)."""


_writers: weakref.WeakKeyDictionary[Any, _Writer] = weakref.WeakKeyDictionary()


def _writer(agent: Any, path: str) -> _Writer:
    where = os.path.abspath(path)
    writer = _writers.get(agent)
    if writer is None or writer.path != where:
        if writer is not None:
            _close(writer)
        writer = _Writer(where, approvals=len(agent.remembered_approvals))
        claim = claim_for(agent, where)
        if claim is not None:
            writer.state, writer.recorded, writer.last = claim.state, claim.recorded, claim.last
        _writers[agent] = writer
    return writer


def _make_dirs(directory: str) -> None:
    missing: list[str] = []
    while not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    for name in reversed(missing):
        try:
            os.mkdir(name, 0o700)
        except FileExistsError:
            continue
        os.chmod(name, 0o700)  # the umask may have taken bits off


def _begin(agent: Any, writer: _Writer) -> None:
    """Open and lock the file for this run and bring it up to date with the transcript."""
    _make_dirs(os.path.dirname(writer.path))
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    file = io.FileIO(os.open(writer.path, flags, 0o600), "r+")
    try:
        if not try_lock(file.fileno()):
            raise SessionConflictError(writer.path, "another agent is writing it right now")
        now = os.fstat(file.fileno())
        messages = agent.state.messages
        if writer.state == _UNSEEN:
            claim = inspect_session(writer.path, _read_all(file, now.st_size), now, messages)
            writer.state, writer.recorded, writer.last = claim.state, claim.recorded, claim.last
        elif (now.st_size != 0) if writer.state is None else (file_state(now) != writer.state):
            raise SessionConflictError(
                writer.path,
                "it changed since this agent last read or wrote it (another agent wrote to "
                "it); one session file holds one conversation: choose a new session_path",
            )
        recorded = writer.recorded
        continues = len(messages) >= recorded and (
            recorded == 0 or messages[recorded - 1] is writer.last
        )
        if not continues and not writer.missed_compaction:
            raise SessionConflictError(
                writer.path,
                "this agent's transcript no longer continues the conversation the file "
                "holds (was it reset?); choose a new session_path",
            )
    except BaseException:
        file.close()
        raise
    writer.file = file
    writer.closer = weakref.finalize(agent, file.close)
    if stat.S_IMODE(now.st_mode) & 0o077:
        try:
            os.fchmod(file.fileno(), 0o600)
        except OSError as error:  # not the owner: write on, but say so
            log.warning("session_file_not_private", path=writer.path, error=str(error))
    records: list[dict[str, Any]] = []
    if now.st_size == 0:
        state = agent.state
        records.append(header_record(state.model.ref, state.system_prompt))
        writer.header = _encode_line(records[0])[:-1]
        records += [_message(message) for message in messages]
    else:
        writer.header = _first_line(file.fileno(), now.st_size)
        _mend_tail(writer, now.st_size)
        if writer.missed_compaction:
            records.append(_compaction(messages))
        else:
            records += [_message(message) for message in messages[recorded:]]
    writer.failed = writer.missed_compaction = False
    _sync(writer)
    if records and _append(writer, records):
        writer.recorded = len(messages)
        writer.last = messages[-1] if messages else None


def _first_line(fd: int, size: int) -> bytes:
    """The first line of the file (without its newline)."""
    line = b""
    while len(line) < size:
        chunk = os.pread(fd, min(_CHUNK, size - len(line)), len(line))
        if not chunk:
            break
        end = chunk.find(b"\n")
        if end >= 0:
            return line + chunk[:end]
        line += chunk
    return line


def _read_all(file: io.FileIO, size: int) -> bytes:
    return os.pread(file.fileno(), size, 0) if size else b""


def _mend_tail(writer: _Writer, size: int) -> None:
    """Complete a last line that lacks only its newline; cut one that is torn."""
    assert writer.file is not None
    fd = writer.file.fileno()
    end = size
    start = 0
    while end > 0:
        low = max(0, end - _CHUNK)
        found = os.pread(fd, end - low, low).rfind(b"\n")
        if found >= 0:
            start = low + found + 1
            break
        end = low
    if start == size:
        return
    if _is_complete_line(os.pread(fd, size - start, start)):
        _write_all(writer.file, b"\n")
    else:
        log.warning("session_torn_line_removed", path=writer.path, bytes=size - start)
        os.ftruncate(fd, start)


def _encode_line(record: dict[str, Any]) -> bytes:
    """One JSONL line of ``record`` (JSON-able data), UTF-8, with its newline.

    Text is written as UTF-8; a string holding a lone surrogate, which UTF-8 cannot hold,
    makes the line fall back to ``\\u`` escapes, which read back to the same string.
    """
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(record, separators=(",", ":")).encode("ascii") + b"\n"


def _is_complete_line(line: bytes) -> bool:
    """Whether ``line`` (without its newline) is a whole record, as reading decides."""
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _message(message: Any) -> dict[str, Any]:
    return {"type": "message", "message": encode_message(message)}


def _approval(writer: _Writer, remembered: Any) -> dict[str, Any]:
    return encode_approval(writer.header, remembered.tool_name, remembered.arguments)


def _compaction(messages: Any) -> dict[str, Any]:
    return {"type": "compaction", "messages": [encode_message(m) for m in messages]}


def _write_all(file: io.FileIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = file.write(view)
        if not written:
            raise OSError("the session file took no bytes")
        view = view[written:]


def _sync(writer: _Writer) -> None:
    """Remember the file as this agent leaves it."""
    assert writer.file is not None
    writer.state = file_state(os.fstat(writer.file.fileno()))


def _append(writer: _Writer, records: list[dict[str, Any]]) -> bool:
    """Write ``records``; on failure log, cut the partial line and stop for this run."""
    assert writer.file is not None and writer.state is not None
    size = writer.state[2]
    try:
        _write_all(writer.file, b"".join(_encode_line(record) for record in records))
    except OSError as error:
        writer.failed = True
        log.error(
            "session_write_failed",
            path=writer.path,
            error=str(error),
            effect="nothing more is written this run; the next run writes what was missed",
        )
        with contextlib.suppress(OSError):
            os.ftruncate(writer.file.fileno(), size)
    try:
        _sync(writer)
    except OSError:
        writer.failed = True
    return not writer.failed


def _close(writer: _Writer) -> None:
    if writer.closer is not None:
        writer.closer.detach()
        writer.closer = None
    if writer.file is not None:
        writer.file.close()  # releases the lock
        writer.file = None


@hookimpl
@observes_when(lambda agent: agent.settings.session_path is not None)
def on_event(event: Any, agent: Any) -> None:
    """Record kept messages and compactions; see the module for the rules."""
    path = agent.settings.session_path
    if path is None:
        return
    kind = event.type
    if kind not in ("agent_start", "message_end", "compaction_end", "agent_end", "tool_decision"):
        return
    writer = _writer(agent, path)
    try:
        if kind == "agent_start":
            _close(writer)
            _begin(agent, writer)
        elif writer.file is None or writer.failed:
            if kind == "compaction_end" and writer.failed and event.error is None:
                writer.missed_compaction = True
            if kind == "agent_end":
                _close(writer)
        elif kind == "message_end":
            # only a message kept in the transcript (not a failed retry attempt)
            kept = agent.last_message is event.message
            if kept and _append(writer, [_message(event.message)]):
                writer.recorded += 1
                writer.last = event.message
        elif kind == "tool_decision":
            remembered = agent.remembered_approvals
            if len(remembered) > writer.approvals:
                try:
                    records = [_approval(writer, item) for item in remembered[writer.approvals :]]
                except (OSError, ValueError) as error:  # no key: the approvals stay unwritten
                    writer.approvals = len(remembered)
                    log.error("session_approval_not_sealed", path=writer.path, error=str(error))
                else:
                    if _append(writer, records):
                        writer.approvals = len(remembered)
        elif kind == "compaction_end":
            if event.error is None:
                messages = agent.state.messages
                if _append(writer, [_compaction(messages)]):
                    writer.recorded = len(messages)
                    writer.last = messages[-1] if messages else None
        else:
            _close(writer)
    except (SessionConflictError, SessionFormatError):
        if kind == "agent_start":
            raise  # not this agent's file: the run fails before anything is sent
        writer.failed = True
        log.error("session_write_refused", path=writer.path, exc_info=True)
    except Exception as error:  # the writer must not fail the run
        writer.failed = True
        log.error("session_write_failed", path=writer.path, error=repr(error))
