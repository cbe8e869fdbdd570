"""The scripted replies of :class:`~mainspring.providers.faux.FauxProvider`: blocks and builders.

See :mod:`mainspring.providers.faux` for how a script is played.
"""

from __future__ import annotations

import json
from collections.abc import (
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, TypeAlias, get_args

from pydantic import BaseModel

from ..messages import (
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    message_text,
)
from .base import (
    ModelRequest,
    ProviderError,
)

__all__ = [
    "Cut",
    "Failure",
    "Reply",
    "ReplyBlock",
    "StaticStep",
    "Step",
    "StepFunction",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "cut",
    "error",
    "raises",
    "reply",
    "text",
    "thinking",
    "tool_call",
]

_STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))


# --------------------------------------------------------------------------- blocks


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Reply text, streamed as ``TextDelta`` chunks."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """Reasoning, streamed as ``ThinkingDelta`` chunks; ``signature`` rides on the last."""

    thinking: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallBlock:
    """A tool call; ``arguments_json`` is streamed verbatim as the argument fragments.

    ``id=None`` means "assign ``call_<n>`` when streamed" (see :class:`FauxProvider`).
    """

    name: str
    arguments_json: str
    id: str | None = None


ReplyBlock: TypeAlias = TextBlock | ThinkingBlock | ToolCallBlock
"""A normalised block of a scripted reply."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One complete assistant reply: its blocks, then ``UsageReport`` and ``StreamDone``.

    ``usage=None`` means "estimate it" (see :class:`FauxProvider`).
    """

    blocks: tuple[ReplyBlock, ...]
    stop_reason: StopReason
    usage: Usage | None = None
    response_id: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """Stream the ``after`` blocks, then raise ``exception``.

    An exception *class* is instantiated (without arguments) each time the step is used.
    """

    exception: BaseException | type[BaseException]
    after: tuple[ReplyBlock, ...] = ()

    def make(self) -> BaseException:
        """The exception to raise for this use of the step."""
        if isinstance(self.exception, type):
            return self.exception()
        return self.exception


@dataclass(frozen=True, slots=True)
class Cut:
    """Stream ``blocks``, then end without ``UsageReport`` or ``StreamDone``."""

    blocks: tuple[ReplyBlock, ...] = ()


StaticStep: TypeAlias = (
    ReplyBlock
    | str
    | TextContent
    | ThinkingContent
    | ToolCall
    | Sequence[Any]
    | Reply
    | Failure
    | Cut
    | AssistantMessage
    | BaseException
    | type[BaseException]
)
"""Any step that is not a function of the request."""

StepFunction: TypeAlias = Callable[[ModelRequest], "StaticStep | Awaitable[StaticStep]"]
"""A step computed from the request, sync or async."""

Step: TypeAlias = StaticStep | StepFunction
"""Anything :class:`FauxProvider` accepts as one scripted reply."""

PreparedStep: TypeAlias = Reply | Failure | Cut


# -------------------------------------------------------------------------- builders


def text(text: str) -> TextBlock:
    """A text block (``text`` is streamed in ``chunk_size`` pieces)."""
    if not isinstance(text, str):
        raise TypeError(f"faux.text() takes a str, got {type(text).__name__}")
    return TextBlock(text)


def thinking(text: str, signature: str | None = None) -> ThinkingBlock:
    """A thinking block; ``signature`` is attached to its last ``ThinkingDelta``."""
    if not isinstance(text, str):
        raise TypeError(f"faux.thinking() takes a str, got {type(text).__name__}")
    return ThinkingBlock(text, signature)


def tool_call(name: str, args: Mapping[str, Any] | str, id: str | None = None) -> ToolCallBlock:
    """A tool call of ``name``.

    A mapping ``args`` is serialised with :func:`json.dumps` now (so a value that is not
    JSON-serialisable fails in the test script, not mid-run). A ``str`` is sent verbatim
    as the argument JSON, so a test can script malformed or truncated JSON. ``id``
    defaults to a deterministic ``call_<n>`` assigned by the provider when streamed.
    """
    if isinstance(args, str):
        arguments_json = args
    elif isinstance(args, Mapping):
        arguments_json = json.dumps(dict(args), ensure_ascii=False)
    else:
        raise TypeError(
            f"faux.tool_call() args must be a dict or a JSON string, got {type(args).__name__}"
        )
    return ToolCallBlock(name, arguments_json, id)


def reply(
    *blocks: ReplyBlock | str | TextContent | ThinkingContent | ToolCall,
    stop_reason: StopReason | None = None,
    usage: Usage | None = None,
    response_id: str | None = None,
) -> Reply:
    """One assistant reply made of ``blocks``, streamed in order.

    ``stop_reason`` defaults to ``"tool_use"`` when any block is a tool call, else
    ``"stop"``; force it (e.g. ``"length"``) to script a cut-off reply. ``usage`` replaces
    the estimate; ``response_id`` is passed on in ``StreamDone``.
    """
    normalised = tuple(_block(block) for block in blocks)
    if stop_reason is None:
        has_call = any(isinstance(block, ToolCallBlock) for block in normalised)
        stop_reason = "tool_use" if has_call else "stop"
    elif stop_reason not in _STOP_REASONS:
        raise ValueError(
            f"faux.reply() stop_reason must be one of {sorted(_STOP_REASONS)}, got {stop_reason!r}"
        )
    return Reply(normalised, stop_reason, usage, response_id)


def error(
    message: str,
    retryable: bool = False,
    status_code: int | None = None,
    retry_after: float | None = None,
    context_overflow: bool = False,
    after: Iterable[ReplyBlock | str | TextContent | ThinkingContent | ToolCall] = (),
) -> Failure:
    """A step that raises :class:`~mainspring.ProviderError` with these fields.

    The blocks in ``after`` are streamed first, to script a failure after partial output.
    """
    exception = ProviderError(
        message,
        retryable=retryable,
        status_code=status_code,
        retry_after=retry_after,
        context_overflow=context_overflow,
    )
    return Failure(exception, tuple(_block(block) for block in after))


def raises(
    exc: BaseException | type[BaseException],
    after: Iterable[ReplyBlock | str | TextContent | ThinkingContent | ToolCall] = (),
) -> Failure:
    """A step that raises ``exc`` (any exception; a class is instantiated on use).

    The blocks in ``after`` are streamed first.
    """
    if not (
        isinstance(exc, BaseException) or (isinstance(exc, type) and issubclass(exc, BaseException))
    ):
        raise TypeError(f"faux.raises() takes an exception, got {exc!r}")
    return Failure(exc, tuple(_block(block) for block in after))


def cut(*blocks: ReplyBlock | str | TextContent | ThinkingContent | ToolCall) -> Cut:
    """A step that streams ``blocks`` and then simply ends: no usage, no ``StreamDone``.

    The kernel must report this as "stream ended before completion".
    """
    return Cut(tuple(_block(block) for block in blocks))


def _block(block: object) -> ReplyBlock:
    if isinstance(block, TextBlock | ThinkingBlock | ToolCallBlock):
        return block
    if isinstance(block, str):
        return TextBlock(block)
    if isinstance(block, TextContent):
        return TextBlock(block.text)
    if isinstance(block, ThinkingContent):
        return ThinkingBlock(block.thinking, block.signature)
    if isinstance(block, ToolCall):
        return ToolCallBlock(block.name, json.dumps(block.arguments, ensure_ascii=False), block.id)
    raise TypeError(
        "a faux reply block must be faux.text(), faux.thinking(), faux.tool_call(), a str, "
        f"or a TextContent/ThinkingContent/ToolCall; got {block!r}"
    )


def is_exception(step: object) -> bool:
    return isinstance(step, BaseException) or (
        isinstance(step, type) and issubclass(step, BaseException)
    )


def prepare_step(step: object) -> PreparedStep:
    """Normalise a static step (``TypeError`` if it is not one)."""
    if isinstance(step, Reply | Failure | Cut):
        return step
    if is_exception(step):
        return Failure(step)  # type: ignore[arg-type]
    if isinstance(step, AssistantMessage):
        return Reply(
            tuple(_block(block) for block in step.content),
            step.stop_reason,
            step.usage,
            step.response_id,
        )
    if isinstance(step, list | tuple):
        return reply(*step)
    if isinstance(step, BaseModel | str | TextBlock | ThinkingBlock | ToolCallBlock):
        return reply(_block(step))
    if callable(step):
        raise TypeError(
            f"a faux step function must return a step, not another function; got {step!r}"
        )
    raise TypeError(
        "a faux step must be a block, a list of blocks, faux.reply()/error()/raises()/cut(), "
        f"an AssistantMessage, an exception, or a function of the request; got {step!r}"
    )


def split_chunks(value: str, size: int) -> list[str]:
    return [value[start : start + size] for start in range(0, len(value), size)]


def estimated_tokens(chars: int) -> int:
    """The faux token estimate: a quarter of the characters, rounded up, at least 1."""
    return max(1, (chars + 3) // 4)


def reply_chars(blocks: Iterable[ReplyBlock]) -> int:
    total = 0
    for block in blocks:
        if isinstance(block, TextBlock):
            total += len(block.text)
        elif isinstance(block, ThinkingBlock):
            total += len(block.thinking)
        else:
            total += len(block.name) + len(block.arguments_json)
    return total


def request_chars(request: ModelRequest) -> int:
    total = 0
    for message in request.messages:
        if isinstance(message, BaseModel):
            total += len(message_text(message))
        for call in getattr(message, "tool_calls", ()):
            total += len(call.name) + len(json.dumps(call.arguments, ensure_ascii=False))
    return total


# -------------------------------------------------------------------------- provider
