"""Assembles provider deltas into an :class:`~mainspring.AssistantMessage`.

Text and thinking deltas extend the current block of their kind (a new block starts when
the kind changes); tool calls collect JSON fragments by id and are parsed when they end.
Malformed arguments never raise here: the call keeps ``arguments={}`` and the problem is
recorded in :attr:`StreamAssembler.argument_errors` for the tool executor to report.
Tool call ids are made unique within the message (a repeated or empty id gets a suffix),
so every call can get exactly one result.
"""

from __future__ import annotations

import json
import time
from typing import Any, final

from ..messages import (
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    freeze,
    trusted_construct,
)
from ..providers.base import (
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)

__all__ = ["StreamAssembler"]


@final
class _CallBuilder:
    __slots__ = ("fragments", "id", "name", "parsed", "wire_id")

    def __init__(self, call_id: str, wire_id: str, name: str) -> None:
        self.id = call_id
        self.wire_id = wire_id
        self.name = name
        self.fragments: list[str] = []
        self.parsed: dict[str, Any] | None = None


@final
class StreamAssembler:
    """Turns a stream of deltas into partial and final assistant messages."""

    __slots__ = (
        "_blocks",
        "_built",
        "_by_wire_id",
        "_calls",
        "_ids",
        "_started",
        "argument_errors",
        "done",
        "model",
        "provider",
        "usage",
    )

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        # [kind, text so far, signature] for text and thinking, or a _CallBuilder
        self._blocks: list[Any] = []
        # the content block last built for each block; None once it changed since
        self._built: list[Any] = []
        self._calls: list[_CallBuilder] = []
        self._by_wire_id: dict[str, _CallBuilder] = {}
        self._ids: set[str] = set()
        self.usage = Usage()
        self.done: StreamDone | None = None
        self.argument_errors: dict[str, str] = {}
        self._started = time.time()

    def add(self, delta: StreamEvent) -> None:
        """Fold one delta into the message."""
        if isinstance(delta, TextDelta):
            self._extend("text", delta.text, None)
        elif isinstance(delta, ThinkingDelta):
            self._extend("thinking", delta.text, delta.signature)
        elif isinstance(delta, ToolCallStart):
            self._start_call(delta.id, delta.name)
        elif isinstance(delta, ToolCallDelta):
            existing = self._by_wire_id.get(delta.id)
            builder = existing if existing is not None else self._start_call(delta.id, "")
            builder.fragments.append(delta.arguments_json_fragment)
        elif isinstance(delta, ToolCallEnd):
            ended = self._by_wire_id.get(delta.id)
            if ended is not None:
                self._parse(ended)
                self._built[self._blocks.index(ended)] = None
        elif isinstance(delta, UsageReport):
            self.usage = delta.usage
        elif isinstance(delta, StreamDone):
            self.done = delta

    def _extend(self, kind: str, text: str, signature: str | None) -> None:
        last = self._blocks[-1] if self._blocks else None
        if isinstance(last, list) and last[0] == kind:
            last[1] += text
            if signature:
                last[2] = signature
            self._built[-1] = None
        else:
            self._blocks.append([kind, text, signature])
            self._built.append(None)

    def _start_call(self, wire_id: str, name: str) -> _CallBuilder:
        call_id = wire_id or f"call_{len(self._calls) + 1}"
        if call_id in self._ids:
            suffix = 2
            while f"{call_id}_{suffix}" in self._ids:
                suffix += 1
            call_id = f"{call_id}_{suffix}"
        self._ids.add(call_id)
        builder = _CallBuilder(call_id, wire_id, name)
        self._calls.append(builder)
        self._by_wire_id[wire_id] = builder
        self._blocks.append(builder)
        self._built.append(None)
        return builder

    def _parse(self, builder: _CallBuilder) -> None:
        if builder.parsed is not None or builder.id in self.argument_errors:
            return
        raw = "".join(builder.fragments)
        if not raw.strip():
            builder.parsed = {}
            return
        try:
            value = json.loads(raw)
        except ValueError as error:
            self.argument_errors[builder.id] = (
                f"the arguments are not valid JSON ({error}); received: {raw!r}"
            )
            builder.parsed = {}
            return
        if not isinstance(value, dict):
            self.argument_errors[builder.id] = (
                f"the arguments must be a JSON object, received: {raw!r}"
            )
            builder.parsed = {}
            return
        builder.parsed = value

    @staticmethod
    def _build(block: Any) -> Any:
        if isinstance(block, _CallBuilder):
            return trusted_construct(
                ToolCall,
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": freeze(block.parsed or {}),
                },
            )
        if block[0] == "text":
            return trusted_construct(TextContent, {"type": "text", "text": block[1]})
        return trusted_construct(
            ThinkingContent, {"type": "thinking", "thinking": block[1], "signature": block[2]}
        )

    def _content(self, *, complete_calls_only: bool) -> tuple[Any, ...]:
        if not complete_calls_only:
            # only the blocks that changed since the last partial are rebuilt
            built = self._built
            for index, cached in enumerate(built):
                if cached is None:
                    built[index] = self._build(self._blocks[index])
            return tuple(built)
        return tuple(
            self._build(block)
            for block in self._blocks
            if not (isinstance(block, _CallBuilder) and block.parsed is None)
        )

    def partial(self) -> AssistantMessage:
        """The message so far (tool calls still streaming have ``arguments={}``)."""
        return trusted_construct(
            AssistantMessage,
            {
                "role": "assistant",
                "content": self._content(complete_calls_only=False),
                "provider": self.provider,
                "model": self.model,
                "usage": self.usage,
                "stop_reason": "stop",
                "error_message": None,
                "response_id": None,
                "timestamp": self._started,
            },
        )

    def finish(self, stop_reason: StopReason, error_message: str | None = None) -> AssistantMessage:
        """The final message.

        A complete reply (``stop``/``length``/``tool_use``) parses every call still open.
        A failed one (``error``/``aborted``) drops calls whose arguments never completed.
        ``stop_reason`` is normalised: a reply with tool calls is ``tool_use`` unless it
        was cut by the length limit; ``tool_use`` without calls is ``stop``.
        """
        failed = stop_reason in ("error", "aborted")
        if not failed:
            for builder in self._calls:
                self._parse(builder)
        content = self._content(complete_calls_only=failed)
        has_calls = any(isinstance(block, ToolCall) for block in content)
        if failed:
            content = tuple(block for block in content if not isinstance(block, ToolCall))
        elif has_calls and stop_reason == "stop":
            stop_reason = "tool_use"
        elif not has_calls and stop_reason == "tool_use":
            stop_reason = "stop"
        return AssistantMessage(
            content=content,
            provider=self.provider,
            model=self.model,
            usage=self.usage,
            stop_reason=stop_reason,
            error_message=error_message,
            response_id=self.done.response_id if self.done else None,
            timestamp=self._started,
        )
