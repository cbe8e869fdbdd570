"""``ReplayProvider``: the model replies of a recorded session, replayed in order.

A real run recorded with ``--session`` (or ``settings.session_path``) becomes a
deterministic regression test: replay its assistant messages as streams, prompt the agent
the same way, and compare transcripts or event streams. Replies that ended in ``error``
are replayed as a non-retryable :class:`~mainspring.ProviderError` with their text;
``aborted`` ones are skipped (an abort is the caller's act, not the model's).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterable

from ..messages import AssistantMessage, TextContent, ThinkingContent, ToolCall
from ..providers.base import (
    Model,
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from ..sessions import read_session
from ..signal import AbortSignal

__all__ = ["ReplayProvider"]


class ReplayProvider:
    """Streams recorded assistant messages, one per request; exhausted → error."""

    def __init__(self, replies: Iterable[AssistantMessage], *, name: str = "replay") -> None:
        self.name = name
        self.replies = [reply for reply in replies if reply.stop_reason != "aborted"]
        self.requests: list[ModelRequest] = []
        self.models: dict[str, Model] = {}

    @classmethod
    def from_session(cls, path: str | os.PathLike[str], *, name: str = "replay") -> ReplayProvider:
        """The assistant replies recorded in the session file ``path``."""
        session = read_session(path)
        replies = [m for m in session.messages if isinstance(m, AssistantMessage)]
        return cls(replies, name=name)

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        """Stream the next recorded reply."""
        self.requests.append(request)
        index = len(self.requests) - 1
        if index >= len(self.replies):
            raise ProviderError(
                f"replay exhausted: request {index + 1}, but only {len(self.replies)} "
                "replies were recorded"
            )
        reply = self.replies[index]
        if reply.stop_reason == "error":
            raise ProviderError(reply.error_message or "recorded error")
        for event in _deltas(reply):
            if signal.aborted:
                return
            yield event


def _deltas(reply: AssistantMessage) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for block in reply.content:
        if isinstance(block, TextContent):
            events.append(TextDelta(block.text))
        elif isinstance(block, ThinkingContent):
            events.append(ThinkingDelta(block.thinking, block.signature))
        elif isinstance(block, ToolCall):
            events.append(ToolCallStart(block.id, block.name))
            events.append(ToolCallDelta(block.id, json.dumps(block.arguments)))
            events.append(ToolCallEnd(block.id))
    events.append(UsageReport(reply.usage))
    events.append(StreamDone(reply.stop_reason, reply.response_id))
    return events
