"""A scripted provider for tests: :class:`FauxProvider` and its reply builders.

Use the module as a namespace::

    from mainspring.testing import faux

    provider = faux.FauxProvider([
        faux.tool_call("read", {"path": "a.txt"}),                 # reply 1: one tool call
        [faux.thinking("done reading"), faux.text("It says hi.")],  # reply 2: two blocks
        faux.error("overloaded", retryable=True, status_code=529),  # reply 3: a failure
        lambda request: faux.text(f"{len(request.messages)} messages"),  # computed
    ])

Every model request consumes one *step* of the script, in order. A step is one of:

- a block: :func:`text`, :func:`thinking`, :func:`tool_call` (or a plain ``str``, or a
  :class:`~mainspring.TextContent`, :class:`~mainspring.ThinkingContent` or
  :class:`~mainspring.ToolCall`), streamed as a one-block reply;
- a list or tuple of blocks: one reply made of those blocks, in order;
- :func:`reply` (blocks plus a forced ``stop_reason``, ``usage`` or ``response_id``);
- an :class:`~mainspring.AssistantMessage` (its content, stop reason, usage and response
  id are replayed);
- :func:`error`, :func:`raises` or an exception instance: the stream fails;
- :func:`cut`: the stream ends without :class:`~mainspring.providers.StreamDone`;
- a callable ``(request) -> step`` or ``async (request) -> step`` computing the reply
  from the :class:`~mainspring.ModelRequest` (it must return a non-callable step).

Static steps are validated when they are scripted (a wrong type raises ``TypeError``
at once); a callable's result is validated when it is called.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, TypeAlias, get_args

from pydantic import BaseModel

from ..kernel.signal import AbortSignal
from ..messages import (
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    message_text,
)
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

__all__ = [
    "Cut",
    "Failure",
    "FauxProvider",
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

_Prepared: TypeAlias = Reply | Failure | Cut


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


def _is_exception(step: object) -> bool:
    return isinstance(step, BaseException) or (
        isinstance(step, type) and issubclass(step, BaseException)
    )


def _prepare(step: object) -> _Prepared:
    """Normalise a static step (``TypeError`` if it is not one)."""
    if isinstance(step, Reply | Failure | Cut):
        return step
    if _is_exception(step):
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


def _chunks(value: str, size: int) -> list[str]:
    return [value[start : start + size] for start in range(0, len(value), size)]


def _tokens(chars: int) -> int:
    """The faux token estimate: a quarter of the characters, rounded up, at least 1."""
    return max(1, (chars + 3) // 4)


def _reply_chars(blocks: Iterable[ReplyBlock]) -> int:
    total = 0
    for block in blocks:
        if isinstance(block, TextBlock):
            total += len(block.text)
        elif isinstance(block, ThinkingBlock):
            total += len(block.thinking)
        else:
            total += len(block.name) + len(block.arguments_json)
    return total


def _request_chars(request: ModelRequest) -> int:
    total = 0
    for message in request.messages:
        if isinstance(message, BaseModel):
            total += len(message_text(message))
        for call in getattr(message, "tool_calls", ()):
            total += len(call.name) + len(json.dumps(call.arguments, ensure_ascii=False))
    return total


# -------------------------------------------------------------------------- provider


class FauxProvider:
    """A provider that streams a script of replies, one step per model request.

    ``stream(request, signal)`` records the request in :attr:`requests`, takes the next
    step (calling it with the request if it is a function) and streams it:

    - text and thinking as ``TextDelta``/``ThinkingDelta`` of ``chunk_size`` characters
      (an empty block still yields one empty delta; a thinking ``signature`` rides on the
      block's last delta);
    - a tool call as ``ToolCallStart``, its argument JSON in ``chunk_size`` fragments of
      ``ToolCallDelta`` (none for empty arguments), ``ToolCallEnd``; a call scripted without
      an id gets ``call_<n>``, ``n`` counting such calls from 1 per provider, so ids are
      deterministic for a given script;
    - then ``UsageReport`` and ``StreamDone(stop_reason, response_id)``. Unless the step
      gives ``usage``, input tokens ≈ the characters of the request's messages / 4
      (text, thinking and tool-call arguments; the system prompt and tool specs are not
      counted), output tokens ≈ the reply's characters / 4, each rounded up and at least
      1, and ``cost_usd`` is priced with ``request.model``.

    With ``delay_s > 0`` it pauses that long between consecutive stream events (not
    before the first); the pause ends at once when ``signal`` is aborted. Before every
    event it checks ``signal.aborted`` and, if set, returns at once without ``StreamDone``
    (an aborted failure step returns instead of raising).

    Every request consumes one step, even one whose signal is already aborted. When the
    script is exhausted the stream raises ``ProviderError("faux script exhausted: ...",
    retryable=False)``. The request is recorded when iteration begins (an async
    generator runs lazily).

    ``name`` is the provider part of ``"<name>:<model-id>"`` refs. ``models`` is an
    optional catalogue (``{id: Model}``) the kernel resolves model ids through; it is an
    empty dict when not given, meaning "any id, with default limits".
    """

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        name: str = "faux",
        chunk_size: int = 4,
        delay_s: float = 0.0,
        models: Mapping[str, Model] | None = None,
    ) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s!r}")
        if isinstance(steps, str | bytes | BaseModel) or not isinstance(steps, Iterable):
            raise TypeError(
                "FauxProvider(steps) takes a sequence of steps; wrap a single step in a list"
            )
        self.name = name
        self.chunk_size = chunk_size
        self.delay_s = delay_s
        self.models: dict[str, Model] = dict(models) if models else {}
        self.requests: list[ModelRequest] = []
        self._steps: deque[_Prepared | StepFunction] = deque()
        self._scripted = 0
        self._auto_ids = 0
        self.extend(steps)

    # ---- the script

    @property
    def remaining(self) -> int:
        """How many scripted steps have not been used yet."""
        return len(self._steps)

    def append(self, *steps: Step) -> None:
        """Add steps to the end of the script (validated now, unless callables)."""
        self.extend(steps)

    def extend(self, steps: Iterable[Step]) -> None:
        """Add every step of ``steps`` to the end of the script."""
        prepared: list[_Prepared | StepFunction] = []
        for step in steps:
            if callable(step) and not _is_exception(step):
                prepared.append(step)
            else:
                prepared.append(_prepare(step))
        self._steps.extend(prepared)
        self._scripted += len(prepared)

    # ---- the provider protocol

    async def stream(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Stream the next scripted step as the reply to ``request`` (see the class doc)."""
        if signal is None:
            signal = AbortSignal()
        self.requests.append(request)
        step = await self._next_step(request)
        events: Iterator[StreamEvent]
        if isinstance(step, Reply):
            events = self._reply_events(step, request)
        elif isinstance(step, Failure):
            events = self._block_events(step.after)
        else:
            events = self._block_events(step.blocks)
        first = True
        for event in events:
            if not first:
                await self._pause(signal)
            first = False
            if signal.aborted:
                return
            yield event
        if isinstance(step, Failure):
            if not first:
                await self._pause(signal)
            if signal.aborted:
                return
            raise step.make()

    # ---- internals

    async def _next_step(self, request: ModelRequest) -> _Prepared:
        if not self._steps:
            raise ProviderError(
                f"faux script exhausted: got request {len(self.requests)} but only "
                f"{self._scripted} requests scripted (add replies with FauxProvider.append)",
                retryable=False,
            )
        step = self._steps.popleft()
        if isinstance(step, Reply | Failure | Cut):
            return step
        result = step(request)
        if inspect.isawaitable(result):
            result = await result
        return _prepare(result)

    def _reply_events(self, step: Reply, request: ModelRequest) -> Iterator[StreamEvent]:
        yield from self._block_events(step.blocks)
        usage = step.usage
        if usage is None:
            estimate = Usage(
                input_tokens=_tokens(_request_chars(request)),
                output_tokens=_tokens(_reply_chars(step.blocks)),
            )
            usage = estimate.model_copy(update={"cost_usd": request.model.cost(estimate)})
        yield UsageReport(usage)
        yield StreamDone(step.stop_reason, step.response_id)

    def _block_events(self, blocks: Iterable[ReplyBlock]) -> Iterator[StreamEvent]:
        size = self.chunk_size
        for block in blocks:
            if isinstance(block, TextBlock):
                for piece in _chunks(block.text, size) or [""]:
                    yield TextDelta(piece)
            elif isinstance(block, ThinkingBlock):
                pieces = _chunks(block.thinking, size) or [""]
                last = len(pieces) - 1
                for index, piece in enumerate(pieces):
                    yield ThinkingDelta(piece, block.signature if index == last else None)
            else:
                call_id = block.id
                if call_id is None:
                    self._auto_ids += 1
                    call_id = f"call_{self._auto_ids}"
                yield ToolCallStart(call_id, block.name)
                for piece in _chunks(block.arguments_json, size):
                    yield ToolCallDelta(call_id, piece)
                yield ToolCallEnd(call_id)

    async def _pause(self, signal: AbortSignal) -> None:
        """Sleep ``delay_s``, waking early if ``signal`` is aborted."""
        if self.delay_s <= 0 or signal.aborted:
            return
        waiter = asyncio.ensure_future(signal.wait())
        try:
            await asyncio.wait({waiter}, timeout=self.delay_s)
        finally:
            if not waiter.done():
                waiter.cancel()
                await asyncio.wait({waiter})

    def __repr__(self) -> str:
        return (
            f"FauxProvider(name={self.name!r}, remaining={self.remaining}, "
            f"requests={len(self.requests)})"
        )
