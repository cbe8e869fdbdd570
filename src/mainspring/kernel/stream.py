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

from ..events import PartialMessage
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
    __slots__ = ("fragments", "id", "name", "parsed", "size", "wire_id")

    def __init__(self, call_id: str, wire_id: str, name: str) -> None:
        self.id = call_id
        self.wire_id = wire_id
        self.name = name
        self.fragments: list[str] = []
        self.parsed: dict[str, Any] | None = None
        self.size = 0


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether JSON-like ``value`` nests objects/arrays more than ``limit`` deep.

    Iterative: the depth of the value never becomes the depth of the Python stack.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values() if _nests(child))
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item if _nests(child))
    return False


def _nests(value: Any) -> bool:
    return isinstance(value, dict | list | tuple)


def _build_text(kind: str, text: str, signature: str | None) -> Any:
    if kind == "text":
        return trusted_construct(TextContent, {"type": "text", "text": text})
    return trusted_construct(
        ThinkingContent, {"type": "thinking", "thinking": text, "signature": signature}
    )


class _TextBlock:
    """An open or closed text or thinking block: its pieces, joined on demand."""

    __slots__ = ("kind", "pieces", "signature")

    def __init__(self, kind: str, text: str, signature: str | None) -> None:
        self.kind = kind
        self.pieces = [text]
        self.signature = signature


@final
class StreamAssembler:
    """Turns a stream of deltas into partial and final assistant messages.

    A text or thinking delta appends a piece to the last block (no string is copied);
    the blocks before that one are built once each time one of them changes (a block
    starts, a tool call ends). :meth:`snapshot` is thus O(1) per delta, and the text is
    joined only when a partial message is actually built.
    """

    __slots__ = (
        "_blocks",
        "_built",
        "_by_wire_id",
        "_calls",
        "_ids",
        "_joined",
        "_max_bytes",
        "_max_depth",
        "_prefix",
        "_started",
        "argument_errors",
        "done",
        "model",
        "provider",
        "usage",
    )

    def __init__(
        self,
        provider: str,
        model: str,
        *,
        max_argument_depth: int = 64,
        max_argument_bytes: int = 1_000_000,
    ) -> None:
        self.provider = provider
        self.model = model
        self._max_depth = max_argument_depth
        self._max_bytes = max_argument_bytes
        # _TextBlock for text and thinking, _CallBuilder for tool calls
        self._blocks: list[Any] = []
        # the content block last built for each block; None once it changed since
        self._built: list[Any] = []
        # the built blocks before an open text block (None: rebuild before use)
        self._prefix: tuple[Any, ...] | None = ()
        # (pieces, count, text) of the longest text joined so far, to extend, not redo
        self._joined: tuple[list[str], int, str] | None = None
        self._calls: list[_CallBuilder] = []
        self._by_wire_id: dict[str, _CallBuilder] = {}
        self._ids: set[str] = set()
        self.usage = Usage()
        self.done: StreamDone | None = None
        self.argument_errors: dict[str, str] = {}
        self._started = time.time()

    def add(self, delta: StreamEvent) -> None:
        """Fold one delta into the message."""
        kind = type(delta)
        if kind is TextDelta:
            self._extend("text", delta.text, None)  # type: ignore[union-attr]
        elif kind is ThinkingDelta:
            self._extend("thinking", delta.text, delta.signature)  # type: ignore[union-attr]
        elif isinstance(delta, ToolCallStart):
            self._start_call(delta.id, delta.name)
        elif isinstance(delta, ToolCallDelta):
            existing = self._by_wire_id.get(delta.id)
            builder = existing if existing is not None else self._start_call(delta.id, "")
            self._add_fragment(builder, delta.arguments_json_fragment)
        elif isinstance(delta, ToolCallEnd):
            ended = self._by_wire_id.get(delta.id)
            if ended is not None:
                self._parse(ended)
                self._built[self._blocks.index(ended)] = None
                self._prefix = None
        elif isinstance(delta, UsageReport):
            self.usage = delta.usage
        elif isinstance(delta, StreamDone):
            self.done = delta
        elif isinstance(delta, TextDelta | ThinkingDelta):  # subclasses of the deltas
            self._extend(
                "text" if isinstance(delta, TextDelta) else "thinking",
                delta.text,
                getattr(delta, "signature", None),
            )

    def _extend(self, kind: str, text: str, signature: str | None) -> None:
        blocks = self._blocks
        last = blocks[-1] if blocks else None
        if type(last) is _TextBlock and last.kind == kind:
            # the open block is never cached in _built (snapshots build it from its
            # pieces), so nothing is invalidated here
            last.pieces.append(text)
            if signature:
                last.signature = signature
        else:
            blocks.append(_TextBlock(kind, text, signature))
            self._built.append(None)
            self._prefix = None

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
        self._prefix = None
        return builder

    def _add_fragment(self, builder: _CallBuilder, fragment: Any) -> None:
        """Keep one piece of a call's JSON arguments, within ``max_argument_bytes``."""
        if builder.id in self.argument_errors:
            return  # already refused: nothing more is kept
        if not isinstance(fragment, str):
            self._refuse(builder, f"the provider sent a {type(fragment).__name__} fragment")
            return
        builder.size += len(fragment)
        if builder.size > self._max_bytes:
            self._refuse(
                builder,
                f"the arguments are longer than the limit of {self._max_bytes} characters "
                "(settings.tools.max_argument_bytes)",
            )
            return
        builder.fragments.append(fragment)

    def _refuse(self, builder: _CallBuilder, why: str) -> None:
        self.argument_errors[builder.id] = why
        builder.fragments = []
        builder.parsed = {}

    def _parse(self, builder: _CallBuilder) -> None:
        if builder.parsed is not None or builder.id in self.argument_errors:
            return
        raw = "".join(builder.fragments)
        if not raw.strip():
            builder.parsed = {}
            return
        try:
            value = json.loads(raw)
        except RecursionError:
            self._refuse(builder, self._too_deep())
            return
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
        if nesting_exceeds(value, self._max_depth):
            self._refuse(builder, self._too_deep())
            return
        builder.parsed = value

    def _too_deep(self) -> str:
        return (
            f"the arguments are nested deeper than the limit of {self._max_depth} levels "
            "(settings.tools.max_argument_depth)"
        )

    def joined(self, pieces: list[str], count: int) -> str:
        """The first ``count`` of ``pieces`` as one string (extending the last join)."""
        cached = self._joined
        if cached is not None and cached[0] is pieces:
            if cached[1] == count:
                return cached[2]
            if cached[1] < count:
                text = cached[2] + "".join(pieces[cached[1] : count])
                self._joined = (pieces, count, text)
                return text
        text = "".join(pieces[:count])
        if cached is None or cached[0] is not pieces or cached[1] < count:
            self._joined = (pieces, count, text)
        return text

    def _build(self, block: Any) -> Any:
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
        pieces = block.pieces
        return _build_text(block.kind, self.joined(pieces, len(pieces)), block.signature)

    def _content(self, upto: int) -> tuple[Any, ...]:
        """The built blocks ``[:upto]``; only those that changed since last time are rebuilt."""
        built, blocks = self._built, self._blocks
        for index in range(upto):
            if built[index] is None:
                built[index] = self._build(blocks[index])
        return tuple(built[:upto])

    def snapshot(self) -> PartialMessage:
        """The message so far, as a :class:`PartialMessage` (O(1) while text streams)."""
        blocks = self._blocks
        last = blocks[-1] if blocks else None
        open_text = isinstance(last, _TextBlock)
        prefix = self._prefix
        if prefix is None:
            prefix = self._prefix = self._content(len(blocks) - 1 if open_text else len(blocks))
        if isinstance(last, _TextBlock):
            return PartialMessage(
                (self, prefix, last.kind, last.pieces, len(last.pieces), last.signature, self.usage)
            )
        return PartialMessage((self, prefix, None, None, 0, None, self.usage))

    def build_partial(self, snapshot: PartialMessage) -> AssistantMessage:
        """The partial message ``snapshot`` (taken by :meth:`snapshot`) stands for."""
        _, prefix, kind, pieces, count, signature, usage = snapshot
        if kind is not None:
            text = self.joined(pieces, count)
            prefix = (*prefix, _build_text(kind, text, signature))
        return self.message(prefix, usage)

    def partial(self) -> AssistantMessage:
        """The message so far (tool calls still streaming have ``arguments={}``)."""
        return self.snapshot().build()

    def message(self, content: tuple[Any, ...], usage: Usage) -> AssistantMessage:
        """A partial message of ``content`` (no checks: the kernel built every block)."""
        return trusted_construct(
            AssistantMessage,
            {
                "role": "assistant",
                "content": content,
                "provider": self.provider,
                "model": self.model,
                "usage": usage,
                "stop_reason": "stop",
                "error_message": None,
                "response_id": None,
                "timestamp": self._started,
            },
        )

    def finish(self, stop_reason: StopReason, error_message: str | None = None) -> AssistantMessage:
        """The final message.

        A complete reply (``stop``/``length``/``tool_use``) parses every call still open.
        A failed one (``error``/``aborted``) drops every tool call: those that never
        completed, and those that did but will not be executed.
        ``stop_reason`` is normalised: a reply with tool calls is ``tool_use`` unless it
        was cut by the length limit; ``tool_use`` without calls is ``stop``.
        """
        failed = stop_reason in ("error", "aborted")
        if not failed:
            for builder in self._calls:
                self._parse(builder)
        content = self._content(len(self._blocks))
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
