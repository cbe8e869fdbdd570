"""A scripted provider: :class:`FauxProvider` plays a script of replies (tests, examples).

Use the module as a namespace::

    from mainspring.testing import faux   # this module and the reply builders

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
from collections import deque
from collections.abc import (
    AsyncIterator,
    Iterable,
    Iterator,
    Mapping,
)

from pydantic import BaseModel

from ..messages import (
    Usage,
)
from ..signal import AbortSignal
from .base import (
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
from .faux_script import (
    Cut,
    Failure,
    PreparedStep,
    Reply,
    ReplyBlock,
    Step,
    StepFunction,
    TextBlock,
    ThinkingBlock,
    estimated_tokens,
    is_exception,
    prepare_step,
    reply_chars,
    request_chars,
    split_chunks,
)

__all__ = ["FauxProvider"]


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
        self.test_only = name == "faux"
        """The built-in ``faux`` provider is for tests: ``mainspring models`` does not list
        it (a scripted provider a plugin registers under its own name is listed)."""
        self.chunk_size = chunk_size
        self.delay_s = delay_s
        self.models: dict[str, Model] = dict(models) if models else {}
        self.requests: list[ModelRequest] = []
        self._steps: deque[PreparedStep | StepFunction] = deque()
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
        prepared: list[PreparedStep | StepFunction] = []
        for step in steps:
            if callable(step) and not is_exception(step):
                prepared.append(step)
            else:
                prepared.append(prepare_step(step))
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

    async def _next_step(self, request: ModelRequest) -> PreparedStep:
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
        return prepare_step(result)

    def _reply_events(self, step: Reply, request: ModelRequest) -> Iterator[StreamEvent]:
        yield from self._block_events(step.blocks)
        usage = step.usage
        if usage is None:
            estimate = Usage(
                input_tokens=estimated_tokens(request_chars(request)),
                output_tokens=estimated_tokens(reply_chars(step.blocks)),
            )
            usage = estimate.model_copy(update={"cost_usd": request.model.cost(estimate)})
        yield UsageReport(usage)
        yield StreamDone(step.stop_reason, step.response_id)

    def _block_events(self, blocks: Iterable[ReplyBlock]) -> Iterator[StreamEvent]:
        size = self.chunk_size
        for block in blocks:
            if isinstance(block, TextBlock):
                for piece in split_chunks(block.text, size) or [""]:
                    yield TextDelta(piece)
            elif isinstance(block, ThinkingBlock):
                pieces = split_chunks(block.thinking, size) or [""]
                last = len(pieces) - 1
                for index, piece in enumerate(pieces):
                    yield ThinkingDelta(piece, block.signature if index == last else None)
            else:
                call_id = block.id
                if call_id is None:
                    self._auto_ids += 1
                    call_id = f"call_{self._auto_ids}"
                yield ToolCallStart(call_id, block.name)
                for piece in split_chunks(block.arguments_json, size):
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
