"""Built-in: records the transcript to a JSONL session file (``settings.session_path``).

Inactive unless ``settings.session_path`` is set (``Agent.from_session`` sets it). A new
file gets the header and the transcript so far; then each message is appended at its
``message_end`` (only messages kept in the transcript: a failed retry attempt is not) and
each compaction at its ``compaction_end``. Every line is flushed before the listener
returns, so ``wait_for_idle()`` means "on disk". A torn last line left by a crash is cut
off before appending. See :mod:`mainspring.sessions` for the format.
"""

from __future__ import annotations

import json
import os
import weakref
from typing import IO, Any

from ..hookspecs import hookimpl
from ..logs import get_logger
from ..sessions import encode_message, header_line

__all__ = ["on_event"]

log = get_logger("mainspring.sessions")

_files: weakref.WeakKeyDictionary[Any, IO[str]] = weakref.WeakKeyDictionary()


def _open(agent: Any, path: str) -> tuple[IO[str], bool]:
    """The agent's session file, and whether it was just created with the transcript."""
    handle = _files.get(agent)
    if handle is not None and not handle.closed:
        return handle, False
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if not new:
        _cut_torn_tail(path)
    handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the agent's life
    weakref.finalize(agent, handle.close)
    if new:
        state = agent.state
        handle.write(header_line(state.model.ref, state.system_prompt))
        for message in state.messages:
            _write(handle, {"type": "message", "message": encode_message(message)})
        handle.flush()
    _files[agent] = handle
    return handle, new


def _cut_torn_tail(path: str) -> None:
    with open(path, "rb+") as raw:
        data = raw.read()
        if data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        log.warning("session_torn_line_removed", path=path, bytes=len(data) - keep)
        raw.truncate(keep)


def _write(handle: IO[str], record: dict[str, Any]) -> None:
    handle.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


@hookimpl
def on_event(event: Any, agent: Any) -> None:
    """Append kept messages and compactions to the session file."""
    path = agent.settings.session_path
    if path is None:
        return
    kind = event.type
    if kind == "agent_start":
        _open(agent, path)
    elif kind == "message_end":
        if agent.last_message is not event.message:
            return
        handle, created = _open(agent, path)
        if created:
            return  # a new file already holds the whole transcript, this message included
        _write(handle, {"type": "message", "message": encode_message(event.message)})
        handle.flush()
    elif kind == "compaction_end" and event.error is None:
        handle, _ = _open(agent, path)
        messages = [encode_message(message) for message in agent.state.messages]
        _write(handle, {"type": "compaction", "messages": messages})
        handle.flush()
