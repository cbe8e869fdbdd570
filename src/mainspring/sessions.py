"""Session files: an append-only JSONL record of one conversation.

Line 1 is a header ``{"type": "session", "version": 1, "model": "p:id", "system_prompt":
..., "created": ts, "id": hex}``. Then one line per transcript entry, ``{"type": "message",
"message": {...}}``, and one per compaction, ``{"type": "compaction", "messages": [...]}``,
whose messages replace the transcript, and one per remembered approval, sealed to the
file (:mod:`mainspring.session_approvals`). Reading (:func:`read_session`):

- a last line without its newline is kept when it is a complete JSON object, and reported
  (``torn_line``) and skipped when it is not: only a crash mid-write leaves one;
- the transcript must keep the tool-call invariants the kernel keeps: every tool result
  answers a call of the assistant message before it, once, and every call is answered
  before the next assistant message. An orphan or second result, or a call left without a
  result, is a :class:`SessionFormatError` naming the line;
- one exception: when the file *ends* in the middle of a tool batch (the program stopped
  while tools ran, so only some results were written), the calls without a result get an
  error result saying so (:data:`INTERRUPTED`), added after the recorded ones and counted
  in :attr:`Session.synthesized`; a warning names the line. Resuming such a file goes on
  like a run that was aborted mid-batch (the session writer records those results first);
- an approval line whose digest does not verify (added by hand, edited, copied from another
  file) is refused with a warning naming the line: the approval is not remembered;
- anything else malformed is a :class:`SessionFormatError` naming the line.

Writing is the built-in ``session_writer`` plugin's job (its module states the rules);
:func:`encode_message` is total, so what a tool returned can never make writing fail.
One file holds one conversation: :mod:`mainspring.session_files` (consulted by the
``Agent`` constructor) refuses a file that holds another conversation or that another
agent is writing, with a :class:`SessionConflictError`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from .logs import get_logger
from .message_json import MAX_DEPTH, CustomMessage, decode_message, encode_message
from .messages import (
    AssistantMessage,
    TextContent,
    ToolResultMessage,
)
from .session_approvals import ApprovalLineError, decode_approval

__all__ = [
    "FORMAT_VERSION",
    "INTERRUPTED",
    "MAX_DEPTH",
    "CustomMessage",
    "Session",
    "SessionAccessError",
    "SessionConflictError",
    "SessionFormatError",
    "decode_message",
    "encode_message",
    "header_line",
    "read_session",
]

FORMAT_VERSION = 1

INTERRUPTED = (
    "No result was recorded for this tool call: the program stopped while the tool ran. "
    "It may or may not have taken effect."
)
"""The text of the error result given on reading to a call the file holds no result for."""

log = get_logger("mainspring.sessions")


class SessionFormatError(ValueError):
    """A session file is malformed at ``line`` (1-based)."""

    def __init__(self, path: str | os.PathLike[str], line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        super().__init__(f"{path}:{line}: {reason}")


class SessionConflictError(ValueError):
    """A session file is not this agent's to write: it holds another conversation, or
    another agent is writing it (one file, one conversation, one writer at a time)."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        super().__init__(f"session file {self.path}: {reason}")


class SessionAccessError(OSError):
    """A session file cannot be read, or cannot be written where it must be: one sentence
    naming the file, what could not be done and why (``errno`` and ``filename`` kept)."""

    def __init__(
        self, path: str | os.PathLike[str], doing: str, error: OSError, why: str | None = None
    ) -> None:
        self.path = str(path)
        super().__init__(error.errno, why or _why(error))
        self.filename = self.path
        self.doing = doing

    def __str__(self) -> str:
        return f"the session file {self.path} cannot be {self.doing}: {self.strerror}"


def _why(error: OSError) -> str:
    """The reason of ``error`` as a phrase a person reads."""
    if isinstance(error, IsADirectoryError):
        return "it is a directory"
    if isinstance(error, NotADirectoryError):
        return "a part of its path is a file, not a directory"
    if isinstance(error, PermissionError):
        return "permission denied (check the file's and its directory's permissions)"
    if isinstance(error, FileNotFoundError):
        return "it does not exist"
    return (error.strerror or str(error)).lower()


def header_record(model: str, system_prompt: str) -> dict[str, Any]:
    """The header record of a new session file."""
    return {
        "type": "session",
        "version": FORMAT_VERSION,
        "model": model,
        "system_prompt": system_prompt,
        "created": time.time(),
        "id": secrets.token_hex(16),  # approval lines are sealed to this line
    }


def header_line(model: str, system_prompt: str) -> str:
    """The header line of a new session file (with its newline)."""
    return json.dumps(header_record(model, system_prompt), ensure_ascii=False) + "\n"


# -- reading ------------------------------------------------------------------------------


@dataclass
class Session:
    """What a session file holds.

    ``messages`` is the transcript; its last ``synthesized`` entries are not in the file
    but added on reading: error results for the calls of the assistant message on line
    ``interrupted_line``, which the file ends before answering. ``torn_line`` is the
    number of a torn last line that was skipped.
    """

    model: str
    system_prompt: str
    messages: list[Any] = field(default_factory=list)
    torn_line: int | None = None
    kind: Literal["session"] = "session"
    interrupted_line: int | None = None
    synthesized: int = 0
    approvals: list[tuple[str, Any]] = field(default_factory=list)
    """Remembered approvals whose lines verified, ``(tool name, arguments)`` as
    ``Remembered`` holds them (``None``: every call; a scope; or the exact arguments)."""


def read_session(path: str | os.PathLike[str]) -> Session:
    """Read a session file (the module docstring states the rules).

    Raises :class:`SessionAccessError` when the file cannot be read (absent, a directory,
    no permission) and :class:`SessionFormatError` when it is malformed.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise SessionAccessError(path, "read", error) from error
    return parse_session(path, raw)


def parse_session(path: str | os.PathLike[str], raw: bytes) -> Session:
    """:func:`read_session` of ``raw``, the bytes of the file ``path``."""
    lines = raw.split(b"\n")
    ends_clean = raw.endswith(b"\n")
    if ends_clean:
        lines.pop()
    if not lines or not lines[0].strip():
        raise SessionFormatError(path, 1, "the file is empty; expected a session header")
    session: Session | None = None
    calls = _Calls(path)
    header = lines[0]
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("a line must be a JSON object")
        except ValueError as error:
            if number == len(lines) and not ends_clean:
                if session is None:
                    raise SessionFormatError(path, 1, "the header line is torn") from None
                log.warning("session_torn_line_skipped", path=str(path), line=number)
                session.torn_line = number
                break
            raise SessionFormatError(path, number, f"not valid JSON: {error}") from None
        if session is None:
            session = _header(path, record)
        else:
            _apply(path, number, session, record, calls, header)
    assert session is not None
    calls.finish(session)
    return session


def _header(path: str | os.PathLike[str], record: dict[str, Any]) -> Session:
    if record.get("type") != "session":
        raise SessionFormatError(path, 1, "expected a session header line first")
    version = record.get("version")
    if version != FORMAT_VERSION:
        raise SessionFormatError(
            path, 1, f"unsupported session format version {version!r} (this is {FORMAT_VERSION})"
        )
    model, prompt = record.get("model"), record.get("system_prompt", "")
    if not isinstance(model, str) or not isinstance(prompt, str):
        raise SessionFormatError(path, 1, "the header needs a string 'model' and 'system_prompt'")
    return Session(model=model, system_prompt=prompt)


def _apply(
    path: str | os.PathLike[str],
    number: int,
    session: Session,
    record: Any,
    calls: _Calls,
    header: bytes,
) -> None:
    kind = record.get("type")
    try:
        if kind == "message":
            message = decode_message(record.get("message"))
            calls.add(message, number)
            session.messages.append(message)
        elif kind == "compaction":
            entries = record.get("messages")
            if not isinstance(entries, list):
                raise ValueError("a compaction line needs a 'messages' list")
            messages = [decode_message(entry) for entry in entries]
            calls.restart()
            for message in messages:
                calls.add(message, number)
            calls.close("the end of the compaction")
            session.messages[:] = messages
        elif kind == "approval":
            try:
                session.approvals.append(decode_approval(header, record))
            except ApprovalLineError as error:
                log.warning("session_approval_refused", path=str(path), line=number, why=str(error))
        else:
            raise ValueError(f"unknown line type {kind!r}")
    except (ValueError, ValidationError) as error:
        if isinstance(error, SessionFormatError):
            raise
        raise SessionFormatError(path, number, str(error)) from None


class _Calls:
    """The open tool batch of a transcript being read: its invariants, line by line."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self.restart()

    def restart(self) -> None:
        self.batch: AssistantMessage | None = None
        self.line = 0
        self.answered: dict[str, bool] = {}
        self.other_after = False  # a non-result entry came after the batch's message

    def add(self, message: Any, line: int) -> None:
        if isinstance(message, AssistantMessage):
            self.close(f"the next assistant message (line {line})")
            self.batch, self.line, self.other_after = message, line, False
            self.answered = {call.id: False for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage):
            call_id = message.tool_call_id
            if call_id not in self.answered:
                raise SessionFormatError(
                    self.path,
                    line,
                    f"a tool result for call {call_id!r}, which the assistant message "
                    "before it did not make",
                )
            if self.answered[call_id]:
                raise SessionFormatError(self.path, line, f"a second result for call {call_id!r}")
            self.answered[call_id] = True
        else:
            self.other_after = True

    def missing(self) -> list[str]:
        return [call_id for call_id, done in self.answered.items() if not done]

    def close(self, before: str) -> None:
        if missing := ", ".join(map(repr, self.missing())):
            problem = f"tool call(s) {missing} have no result before {before}"
            raise SessionFormatError(self.path, self.line, problem)

    def finish(self, session: Session) -> None:
        """At the end of the file: give an interrupted batch's open calls their results."""
        missing = self.missing()
        if not missing or self.batch is None:
            return
        if self.other_after:
            self.close("the messages after it")
        batch = self.batch
        for call in batch.tool_calls:
            if call.id in missing:
                session.messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=(TextContent(text=INTERRUPTED),),
                        is_error=True,
                        timestamp=batch.timestamp,
                    )
                )
        session.synthesized = len(missing)
        session.interrupted_line = self.line
        log.warning("session_interrupted_tool_calls", path=str(self.path), line=self.line)
