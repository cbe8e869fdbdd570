"""The ``anthropic`` provider: the Messages API, streamed, with thinking and tool use.

Decisions where the API leaves room:

- ``stop_reason``: ``end_turn``, ``stop_sequence`` and ``pause_turn`` → ``stop``;
  ``max_tokens`` and ``model_context_window_exceeded`` → ``length``; ``tool_use`` →
  ``tool_use``; ``refusal`` raises a non-retryable :class:`ProviderError` (an error
  message says why the reply stopped); anything else → ``stop``.
- The stream is complete at ``message_stop``, or at its end if a ``message_delta`` gave
  a stop reason; with neither, it raises a retryable "stream ended before completion".
  A stream that completes without a ``message_start`` (e.g. ``message_stop`` alone)
  raises a non-retryable error: the server sent no message at all.
  ``error`` events map like HTTP error bodies: ``overloaded_error``, ``api_error`` and
  ``rate_limit_error`` are retryable, "prompt is too long" is a context overflow.
- ``content_block_stop`` may come late (all at the end) or never: every tool call still
  open gets its ``ToolCallEnd`` at ``message_delta``/``message_stop``. A ``tool_use``
  block whose start carries a non-empty ``input`` and that gets no ``input_json_delta``
  sends that input as its one argument fragment.
- Thinking blocks are replayed only with their signature (the API rejects unsigned ones,
  e.g. thinking recorded from another provider); ``redacted_thinking`` blocks are not
  kept. With ``thinking_level`` other than ``off`` on a ``reasoning`` model, extended
  thinking is enabled with :data:`THINKING_BUDGETS` tokens, capped so at least 1,024
  tokens of ``max_tokens`` remain for the answer (below 1,024 budget it stays off).
- Usage: ``input_tokens``, ``cache_read_input_tokens`` → ``cache_read_tokens``,
  ``cache_creation_input_tokens`` → ``cache_write_tokens``, ``output_tokens``; later
  reports update earlier values; ``cost_usd`` is priced with the request's model.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ..messages import (
    AssistantMessage,
    ImageContent,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .base import (
    Model,
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingLevel,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from .base_urls import without_api_version
from .http import (
    DEFAULT_REQUEST_TIMEOUT_S,
    HTTPProvider,
    TimeoutSpec,
    decode_event_json,
    error_from_payload,
)
from .keys import api_key as env_api_key
from .keys import missing_key
from .sse import SSEEvent

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_ANTHROPIC_BASE_URL",
    "THINKING_BUDGETS",
    "AnthropicProvider",
    "to_anthropic_messages",
]

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
THINKING_BUDGETS: Mapping[ThinkingLevel, int] = {
    "minimal": 1024,
    "low": 4096,
    "medium": 10_000,
    "high": 32_000,
}
_MIN_BUDGET = 1024
_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
}
_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class AnthropicProvider(HTTPProvider):
    """Streams ``POST {base_url}/v1/messages``.

    ``base_url`` defaults to ``$ANTHROPIC_BASE_URL``, then ``https://api.anthropic.com``
    (a trailing ``/v1`` is dropped); ``api_key`` to ``$ANTHROPIC_API_KEY``, sent as
    ``x-api-key`` (none behind a local proxy) with ``anthropic-version: 2023-06-01``.
    ``options`` are merged into the body (``None`` removes a key), so ``options=
    {"thinking": {...}}`` overrides the thinking budget. :class:`HTTPProvider` documents
    ``timeout``, ``request_timeout_s``, ``transport``, ``headers``; ``models``: the catalogue.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        name: str = "anthropic",
        options: Mapping[str, Any] | None = None,
        timeout: TimeoutSpec = None,
        transport: httpx.AsyncBaseTransport | None = None,
        models: Mapping[str, Model] | Iterable[Model] | None = None,
        headers: Mapping[str, str] | None = None,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
    ) -> None:
        super().__init__(
            name=name,
            base_url=without_api_version(
                base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_BASE_URL
            ),
            api_key=api_key if api_key is not None else env_api_key("ANTHROPIC_API_KEY"),
            options=options,
            timeout=timeout,
            transport=transport,
            models=models,
            headers=headers,
            request_timeout_s=request_timeout_s,
        )

    def credentials_problem(self) -> str | None:
        """``ANTHROPIC_API_KEY`` missing for a server that is not local (see :mod:`.keys`)."""
        return missing_key(self.name, self._api_key, self.base_url, "ANTHROPIC_API_KEY")

    def _auth_headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (options merged)."""
        max_tokens = request.model.max_output_tokens
        body: dict[str, Any] = {
            "model": request.model.id,
            "max_tokens": max_tokens,
            "stream": True,
            "messages": to_anthropic_messages(request.messages),
        }
        if request.system_prompt:
            body["system"] = request.system_prompt
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if request.thinking_level != "off" and request.model.reasoning:
            budget = min(THINKING_BUDGETS[request.thinking_level], max_tokens - _MIN_BUDGET)
            if budget >= _MIN_BUDGET:
                body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        return self._body(body)

    endpoint = "/v1/messages"

    def _stream_state(self, request: ModelRequest) -> _MessagesStream:
        return _MessagesStream(self.name, request.model, self._secrets())


def to_anthropic_messages(messages: Sequence[object]) -> list[dict[str, Any]]:
    """Convert a transcript to Messages API messages.

    Consecutive tool results become ``tool_result`` blocks of one user message; empty
    text blocks and unsigned thinking are left out; an assistant message left empty is
    skipped.
    """
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None
    for message in messages:
        if isinstance(message, ToolResultMessage):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
            content = _blocks(message.content)
            if content:
                block["content"] = content
            if message.is_error:
                block["is_error"] = True
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append(block)
            continue
        results = None
        if isinstance(message, UserMessage):
            user = message.content
            out.append(
                {"role": "user", "content": user if isinstance(user, str) else _blocks(user)}
            )
        elif isinstance(message, AssistantMessage):
            blocks = [b for b in map(_assistant_block, message.content) if b is not None]
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        else:
            role = getattr(message, "role", type(message).__name__)
            raise ProviderError(f"cannot send a {role!r} message to an Anthropic model")
    return out


def _blocks(content: Iterable[TextContent | ImageContent]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        else:
            source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
            blocks.append({"type": "image", "source": source})
    return blocks


def _assistant_block(block: TextContent | ThinkingContent | ToolCall) -> dict[str, Any] | None:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ThinkingContent):
        if not block.signature:
            return None
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}


@dataclass(slots=True)
class _ToolBlock:
    id: str
    start_input: str | None
    got_delta: bool = False
    open: bool = True


class _MessagesStream:
    """Turns Messages API events into stream events; one per ``stream()`` call."""

    def __init__(self, provider: str, model: Model, secrets: list[str]) -> None:
        self.provider = provider
        self.model = model
        self.secrets = secrets
        self.response_id: str | None = None
        self.stop_reason: str | None = None
        self.tools: dict[object, _ToolBlock] = {}
        self.usage: dict[str, int] = {}
        self.started = False
        self.done = False

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        if not event.data.strip():
            return []
        payload = decode_event_json(self.provider, event)
        kind = payload.get("type") or event.event
        if kind == "error" or event.event == "error":
            error = payload.get("error", payload)
            raise error_from_payload(self.provider, error, secrets=self.secrets)
        out: list[StreamEvent] = []
        if kind == "message_start":
            self.started = True
            message = _dict(payload.get("message"))
            if isinstance(message.get("id"), str):
                self.response_id = message["id"]
            self._usage(message.get("usage"), out)
        elif kind == "content_block_start":
            self._block_start(payload.get("index"), _dict(payload.get("content_block")), out)
        elif kind == "content_block_delta":
            self._block_delta(payload.get("index"), _dict(payload.get("delta")), out)
        elif kind == "content_block_stop":
            tool = self.tools.get(payload.get("index"))
            if tool is not None:
                self._close(tool, out)
        elif kind == "message_delta":
            reason = _dict(payload.get("delta")).get("stop_reason")
            if isinstance(reason, str) and reason:
                self.stop_reason = reason
                self._close_all(out)
            self._usage(payload.get("usage"), out)
        elif kind == "message_stop":
            out += self._complete()
        return out

    def finish(self) -> list[StreamEvent]:
        """The stream ended: complete it if a stop reason came, else raise."""
        if self.done:
            return []
        if self.stop_reason is None:
            raise ProviderError(f"{self.provider}: stream ended before completion", retryable=True)
        return self._complete()

    def _block_start(self, index: object, block: dict[str, Any], out: list[StreamEvent]) -> None:
        kind = block.get("type")
        if kind == "text":
            _text(block.get("text"), out)
        elif kind == "thinking":
            text, signature = block.get("thinking"), block.get("signature")
            text = text if isinstance(text, str) else ""
            signature = signature if isinstance(signature, str) and signature else None
            if text or signature:
                out.append(ThinkingDelta(text, signature))
        elif kind == "tool_use":
            call_id = block.get("id")
            call_id = call_id if isinstance(call_id, str) and call_id else _new_id()
            name = block.get("name")
            given = block.get("input")
            start_input = json.dumps(given) if isinstance(given, dict) and given else None
            self.tools[index] = _ToolBlock(call_id, start_input)
            out.append(ToolCallStart(call_id, name if isinstance(name, str) else ""))

    def _block_delta(self, index: object, delta: dict[str, Any], out: list[StreamEvent]) -> None:
        kind = delta.get("type")
        if kind == "text_delta":
            _text(delta.get("text"), out)
        elif kind == "thinking_delta":
            thinking = delta.get("thinking")
            if isinstance(thinking, str) and thinking:
                out.append(ThinkingDelta(thinking))
        elif kind == "signature_delta":
            signature = delta.get("signature")
            if isinstance(signature, str) and signature:
                out.append(ThinkingDelta("", signature))
        elif kind == "input_json_delta":
            tool = self.tools.get(index)
            fragment = delta.get("partial_json")
            if tool is not None and tool.open and isinstance(fragment, str):
                tool.got_delta = True
                if fragment:
                    out.append(ToolCallDelta(tool.id, fragment))

    def _close(self, tool: _ToolBlock, out: list[StreamEvent]) -> None:
        if not tool.open:
            return
        if tool.start_input and not tool.got_delta:
            out.append(ToolCallDelta(tool.id, tool.start_input))
        tool.open = False
        out.append(ToolCallEnd(tool.id))

    def _close_all(self, out: list[StreamEvent]) -> None:
        for tool in self.tools.values():
            self._close(tool, out)

    def _complete(self) -> list[StreamEvent]:
        if not self.started:
            raise ProviderError(
                f"{self.provider}: the stream ended without a message (no message_start)"
            )
        out: list[StreamEvent] = []
        self._close_all(out)
        if self.stop_reason == "refusal":
            raise ProviderError(
                f"{self.provider}: the model refused to answer (stop_reason=refusal)"
            )
        self.done = True
        out.append(StreamDone(_STOP.get(self.stop_reason or "", "stop"), self.response_id))
        return out

    def _usage(self, usage: object, out: list[StreamEvent]) -> None:
        if not isinstance(usage, dict):
            return
        for key in _USAGE_FIELDS:
            value = usage.get(key)
            if isinstance(value, int) and value >= 0:
                self.usage[key] = value
        report = Usage(
            input_tokens=self.usage.get("input_tokens", 0),
            output_tokens=self.usage.get("output_tokens", 0),
            cache_read_tokens=self.usage.get("cache_read_input_tokens", 0),
            cache_write_tokens=self.usage.get("cache_creation_input_tokens", 0),
        )
        out.append(UsageReport(report.model_copy(update={"cost_usd": self.model.cost(report)})))


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(text: object, out: list[StreamEvent]) -> None:
    if isinstance(text, str) and text:
        out.append(TextDelta(text))


def _new_id() -> str:
    return f"toolu_{uuid.uuid4().hex[:24]}"
