"""Session files: an append-only JSONL record of a transcript.

Line 1 is a header ``{"type": "session", "version": 1, "model": "p:id", "system_prompt":
..., "created": ts}``. Then one line per transcript entry, ``{"type": "message",
"message": {...}}``, and one per compaction, ``{"type": "compaction", "messages": [...]}``,
whose messages replace the transcript. Lines are written whole and flushed one at a time,
so a crash can only tear the last line: :func:`read_session` reports a torn last line and
skips it; anything else malformed is a :class:`SessionFormatError` naming the line.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from .logs import get_logger
from .messages import AssistantMessage, CompactionSummary, ToolResultMessage, UserMessage

__all__ = [
    "FORMAT_VERSION",
    "CustomMessage",
    "Session",
    "SessionFormatError",
    "decode_message",
    "encode_message",
    "header_line",
    "read_session",
]

FORMAT_VERSION = 1

log = get_logger("mainspring.sessions")


class CustomMessage(BaseModel):
    """A custom-role message read back from a session file (its fields kept as they were)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    role: str


_KNOWN: dict[str, TypeAdapter[Any]] = {
    "user": TypeAdapter(UserMessage),
    "assistant": TypeAdapter(AssistantMessage),
    "tool_result": TypeAdapter(ToolResultMessage),
    "compaction": TypeAdapter(CompactionSummary),
}


class SessionFormatError(ValueError):
    """A session file is malformed at ``line`` (1-based)."""

    def __init__(self, path: str | os.PathLike[str], line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        super().__init__(f"{path}:{line}: {reason}")


def encode_message(message: Any) -> dict[str, Any]:
    """The JSON form of a transcript entry."""
    if isinstance(message, BaseModel):
        data: dict[str, Any] = message.model_dump(mode="json")
        return data
    raise TypeError(f"cannot store {message!r}: transcript entries are pydantic models")


def decode_message(data: Any) -> Any:
    """A transcript entry from its JSON form (unknown roles become :class:`CustomMessage`)."""
    if not isinstance(data, dict) or not isinstance(data.get("role"), str):
        raise ValueError("a message needs a string 'role'")
    adapter = _KNOWN.get(data["role"])
    if adapter is None:
        return CustomMessage.model_validate(data)
    return adapter.validate_python(data)


def header_line(model: str, system_prompt: str) -> str:
    """The header line of a new session file (with its newline)."""
    header = {
        "type": "session",
        "version": FORMAT_VERSION,
        "model": model,
        "system_prompt": system_prompt,
        "created": time.time(),
    }
    return json.dumps(header, ensure_ascii=False) + "\n"


@dataclass
class Session:
    """What a session file holds."""

    model: str
    system_prompt: str
    messages: list[Any] = field(default_factory=list)
    torn_line: int | None = None
    kind: Literal["session"] = "session"


def read_session(path: str | os.PathLike[str]) -> Session:
    """Read a session file; a torn last line is logged and skipped."""
    raw = Path(path).read_bytes()
    lines = raw.split(b"\n")
    ends_clean = raw.endswith(b"\n")
    if ends_clean:
        lines.pop()
    if not lines or not lines[0].strip():
        raise SessionFormatError(path, 1, "the file is empty; expected a session header")
    session: Session | None = None
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("a line must be a JSON object")
        except ValueError as error:
            if last and not ends_clean:
                log.warning("session_torn_line_skipped", path=str(path), line=number)
                assert session is not None or number > 1
                if session is not None:
                    session.torn_line = number
                break
            raise SessionFormatError(path, number, f"not valid JSON: {error}") from None
        if number == 1:
            session = _header(path, record)
            continue
        assert session is not None
        _apply(path, number, session, record)
    if session is None:
        raise SessionFormatError(path, 1, "the header line is torn")
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


def _apply(path: str | os.PathLike[str], number: int, session: Session, record: Any) -> None:
    kind = record.get("type")
    try:
        if kind == "message":
            session.messages.append(decode_message(record.get("message")))
        elif kind == "compaction":
            entries = record.get("messages")
            if not isinstance(entries, list):
                raise ValueError("a compaction line needs a 'messages' list")
            session.messages[:] = [decode_message(entry) for entry in entries]
        else:
            raise ValueError(f"unknown line type {kind!r}")
    except (ValueError, ValidationError) as error:
        raise SessionFormatError(path, number, str(error)) from None
