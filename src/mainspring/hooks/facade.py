"""The hook facade: every hook called with its rule from the hook table.

The engine never calls ``pm.hook.x(...)``; it calls the methods of :class:`Hooks`. Each
method is the hook's combining rule (:class:`~mainspring.contract.table.Combine`) written as a
loop over the hook's compiled plan (:mod:`mainspring.hooks.plan`) driven by one function,
:meth:`Hooks._drive`, and every exception is classified by one
function, :func:`~mainspring.hooks.failures.failure_of` (after
:func:`~mainspring.hooks.failures.passes_through`). What a failure or a stall then means is
the hook's row of the table; ``report`` callbacks turn a contained failure into a
``hook_error`` event.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, final

from ..contract.decisions import Ask, Block, CompactionResult, Edit
from ..contract.errors import HookError
from ..contract.table import HOOKS, Failure
from ..effects import UNTRUSTED, Labels
from ..messages import freeze
from ..tools import ToolResult
from ..workers import Owned, in_daemon_thread
from .failures import failure_of, kernel_finding, passes_through, stalled, timed_out
from .guard import Guard
from .plan import HookRelay, Implementation
from .scan import scan

if TYPE_CHECKING:
    from ..messages import ToolCall
    from ..providers.base import Model, Provider
    from ..signal import AbortSignal
    from ..tools import Tool

__all__ = ["GateDecision", "Hooks", "Report", "as_tuple"]

HANDOVER_WAIT_S = 0.0002
"""How long the loop's thread waits, blocked, for a hand-over of plain ``def``
implementations to come back before it awaits it (see
:func:`~mainspring.workers.in_daemon_thread`): implementations that only compute come back
within it; one that blocks costs the loop this much once."""

Report = Callable[[HookError, str], Awaitable[None]]
"""``report(error, outcome)``: emit a ``hook_error`` saying what the kernel did."""

Check = Callable[..., "str | None"]
"""``check(messages, llm_only=...)``: what is wrong with a transcript a plugin returned
(``llm_only``: it must hold LLM messages only), or ``None``."""


@final
@dataclass(frozen=True, slots=True)
class GateDecision:
    """The outcome of ``before_tool_call``: ``plugin`` is ``None`` when allowed.

    ``asked`` is ``(plugin, reason)`` when no gate blocked and some asked for approval
    (the first gate that asked; the reasons of all of them). ``rule`` is the deciding
    rule. ``edited_by`` names the gates that edited the call; then ``call`` and ``args``
    are the edited call and its validated arguments (else ``None``).
    """

    blocked: bool
    plugin: str | None = None
    reason: str | None = None
    asked: tuple[str, str] | None = None
    rule: str | None = None
    edited_by: tuple[str, ...] = ()
    call: Any = None
    args: Any = None


_ALLOWED = GateDecision(False)


@final
class _Gating:
    """The call as the gates of one ``before_tool_call`` see it, and what they decided."""

    __slots__ = ("args", "asked", "call", "decision", "edited_by")

    def __init__(self, call: Any, args: Any) -> None:
        self.call = call
        self.args = args
        self.asked: list[tuple[str, str, str | None]] = []
        self.edited_by: list[str] = []
        self.decision: GateDecision | None = None

    def edit(
        self,
        plugin: str,
        arguments: Any,
        revalidate: Callable[[Any], Any] | None,
    ) -> None:
        """Apply an ``Edit`` from ``plugin`` (a :class:`HookError` if it cannot run)."""
        if revalidate is None or not isinstance(arguments, Mapping):
            raise HookError("before_tool_call", plugin, "returned an Edit that cannot apply")
        try:
            self.args = revalidate(arguments)
        except Exception as error:
            raise HookError(
                "before_tool_call", plugin, f"edited the arguments into invalid ones: {error}"
            ) from None
        self.call = self.call.model_copy(update={"arguments": freeze(dict(arguments))})
        self.edited_by.append(plugin)

    def outcome(self) -> GateDecision:
        edited = tuple(self.edited_by)
        call, args = (self.call, self.args) if edited else (None, None)
        decision = self.decision
        if decision is not None:
            return replace(decision, edited_by=edited, call=call, args=args)
        if self.asked:
            reasons = "; ".join(reason for _, reason, _ in self.asked)
            plugin, _, rule = self.asked[0]
            return GateDecision(
                False, asked=(plugin, reasons), rule=rule, edited_by=edited, call=call, args=args
            )
        if not edited:
            return _ALLOWED
        return GateDecision(False, edited_by=edited, call=call, args=args)


def as_tuple(value: Any, hook: str, plugin: str) -> tuple[Any, ...]:
    """``value`` (a sequence a plugin returned) as a tuple; a :class:`HookError` if it is not."""
    if isinstance(value, tuple):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return tuple(value)
    raise HookError(hook, plugin, f"returned {type(value).__name__}, expected a sequence")


Arguments = tuple[Any, ...] | Callable[[Any], tuple[Any, ...]]
"""An implementation's arguments: the same tuple for each, or ``args_of(carry)``."""

Absorb = Callable[[Implementation, Any, Any], tuple[Any, bool]]
"""``absorb(impl, carry, result) -> (carry, stop)``: one result folded in (pure computing)."""

Failed = Callable[[HookError, Any], Awaitable[tuple[Any, bool]]]
"""``await failed(error, carry) -> (carry, go_on)``: a failure reported and applied."""


@final
class _Progress:
    """Where a worker thread is in a segment of implementations; ``cut`` stops it."""

    __slots__ = ("at", "cut", "pending", "plugin")

    def __init__(self, plugin: str) -> None:
        self.at = 0
        self.cut = False
        self.plugin = plugin  # names the segment in the guard's logs
        self.pending: Any = None
        """An awaitable a plain def returned, handed to the loop to await."""

    def hold(self, awaitable: Any) -> None:
        """In the thread: keep ``awaitable`` for the loop (closed if nobody waits)."""
        self.pending = Owned(awaitable) if inspect.iscoroutine(awaitable) else awaitable
        if self.cut:
            self.drop()

    def take(self) -> Any:
        """On the loop: the awaitable held, now the caller's to await."""
        pending, self.pending = self.pending, None
        return pending.take() if isinstance(pending, Owned) else pending

    def drop(self) -> None:
        """Close a coroutine held for a caller that stopped waiting (it is never awaited)."""
        pending, self.pending = self.pending, None
        if isinstance(pending, Owned):
            pending.close()


def _run_segment(
    segment: tuple[Implementation, ...],
    carry: Any,
    args_of: Arguments,
    absorb: Absorb,
    progress: _Progress,
) -> tuple[int, Any, bool, BaseException | None, bool]:
    """In a worker thread: call ``segment`` in order, folding each result in.

    ``(ran, carry, stop, raised, pending)``: ``ran`` is the position after the last
    implementation folded in, or that of the one that raised (``raised``) or returned an
    awaitable (``pending`` is true; the awaitable is held by ``progress`` for the loop).
    """
    fixed = args_of if type(args_of) is tuple else None
    for position, impl in enumerate(segment):
        if progress.cut:  # the caller stopped waiting: nothing more is called
            return position, carry, False, None, False
        progress.at, progress.plugin = position, impl.plugin
        try:
            result = impl.call(fixed if fixed is not None else args_of(carry))  # type: ignore[operator]
            if result is None:
                continue
            if inspect.isawaitable(result):
                progress.hold(result)
                return position, carry, False, None, True
            carry, stop = absorb(impl, carry, result)
        except BaseException as raised:  # raised on the loop, as if called there
            return position, carry, False, raised, False
        if stop:
            return position + 1, carry, True, None, False
    return len(segment), carry, False, None, False


def _withheld(plugin: str, why: str) -> str:
    """The text that stands for a reply a reviewer withheld."""
    return f"[The reply was withheld by {plugin}: {why}]"


def _text(reason: object) -> str:
    """A gate's reason as text; a reason that is not a string is named by its type."""
    return reason if isinstance(reason, str) else f"(a {type(reason).__name__} as the reason)"


@final
class Hooks:
    """Calls every hook with its combining rule and failure semantics.

    An agent's hooks are called outside any run (registration, ``resume()``'s check) with
    a guard of their own; each run calls them through :meth:`bound`, whose awaitable
    results are awaited under the run's :class:`Guard` with the ``hooks.timeout_s``
    deadline. What passes through untouched,
    whatever the hook: ``StopRun``, ``KeyboardInterrupt``/``SystemExit``, the run's own
    cancellation and its abort. Every other exception, ``BaseException`` subclasses
    included, is the implementation's failure. An implementation that timed out or was
    detached is not called again in the run: where it would be, the kernel applies the
    hook's stall rule (a gate blocks, a filter withholds, a transform or observer is
    skipped).
    """

    __slots__ = ("check_transcript", "guard", "relay", "timeout_s")

    def __init__(
        self,
        relay: HookRelay,
        check_transcript: Check,
        guard: Guard | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.relay = relay
        self.check_transcript = check_transcript
        self.guard = Guard(0.0) if guard is None else guard
        self.timeout_s = timeout_s

    def bound(self, guard: Guard, timeout_s: float | None) -> Hooks:
        """These hooks for one run: awaited under ``guard``, each call within ``timeout_s``
        (the same implementations and plans; this object is not changed)."""
        return Hooks(self.relay, self.check_transcript, guard, timeout_s)

    # -- the one call path ----------------------------------------------------------------

    async def _drive(
        self,
        hook: str,
        carry: Any,
        args_of: Arguments,
        absorb: Absorb,
        failed: Failed,
        deadline: float | None = None,
        span: tuple[int, int] | None = None,
        quiet: Any = None,
    ) -> Any:
        """Call ``hook``'s implementations in plan order; the final ``carry``.

        For each implementation: ``args_of`` is its arguments (or ``args_of(carry)``
        gives them), and ``absorb(impl, carry, result)`` (pure computing: it may run in a
        worker thread) folds a result that is not ``None`` (nor ``quiet``, the hook's
        other "no opinion" value) in, returning ``(carry, stop)``; ``stop`` ends the
        calls (``None`` is "no opinion" for every hook: the carry stays, the calls go
        on). A failure (an exception, garbage caught by ``absorb``, a timeout, a stall)
        is classified once and handed to ``await failed(error, carry)``, which reports it
        and returns ``(carry, go_on)``. Awaitable results are awaited under the run's
        guard with ``hooks.timeout_s`` (or until ``deadline``, the loop's clock).
        ``span``, when given, is the ``(start, end)`` part of the hook's plan to call.

        Implementations called on the loop are called by
        :func:`~mainspring.hooks.scan.scan` while they have no opinion.
        Consecutive *threaded* implementations (a plugin's plain ``def``) run in one
        worker-thread hand-over, in order, with ``absorb`` between them: they share one
        deadline, and if it passes, the one running then is blamed (stalled) and the
        ones after it are called in a new hand-over.
        """
        compiled = self.relay.calls(hook)
        plan, steps, loop_until = compiled.plan, compiled.steps, compiled.loop_until
        index, count = (0, len(plan)) if span is None else span
        guard = self.guard
        blamed = guard.stalled
        fixed = args_of if type(args_of) is tuple else None
        timeout = self.timeout_s
        while index < count:
            impl = plan[index]
            if blamed and id(impl) in blamed:
                index += 1
                if HOOKS[hook].on_stall is not Failure.SKIP:
                    carry, go_on = await failed(stalled(hook, impl.plugin), carry)
                    if not go_on:
                        return carry
                continue
            if deadline is not None:
                timeout = max(deadline - asyncio.get_running_loop().time(), 0.0)
            if impl.threaded:
                end = index + 1
                while end < count and plan[end].threaded and id(plan[end]) not in blamed:
                    end += 1
                index, carry, stop, error = await self._segment(
                    hook, plan[index:end], index, carry, args_of, absorb, timeout
                )
            else:
                args = fixed if fixed is not None else args_of(carry)  # type: ignore[operator]
                result, raised = None, None
                if not impl.awaits:
                    # on the loop: every quiet implementation up to the next one that is
                    # not (one at a time once some implementation stalled: each is
                    # checked first)
                    end = index + 1 if blamed else min(loop_until[index], count)
                    index, result, raised = scan(steps, args, index, end, quiet)
                    if index == end:
                        continue
                impl = plan[index]
                index += 1
                stop = False
                try:
                    if raised is not None:
                        raise raised
                    if result is None:  # an async def, not called by a scan
                        result = impl.call(args)
                    if impl.awaits or inspect.isawaitable(result):
                        ready, result = guard.step(result)
                        if not ready:
                            result = await guard.follow(result, impl, timeout)
                    error = None
                    if result is None or result is quiet:
                        continue
                    carry, stop = absorb(impl, carry, result)
                except BaseException as failure:
                    error = self._classify(hook, impl, failure)
            if error is not None:
                carry, go_on = await failed(error, carry)
                if not go_on:
                    return carry
            elif stop:
                return carry
        return carry

    async def _segment(
        self,
        hook: str,
        segment: tuple[Implementation, ...],
        start: int,
        carry: Any,
        args_of: Arguments,
        absorb: Absorb,
        limit_s: float | None,
    ) -> tuple[int, Any, bool, HookError | None]:
        """Run ``segment`` (threaded implementations from plan index ``start``) in one
        worker-thread hand-over: ``(next index, carry, stop, error)``."""
        progress = _Progress(segment[0].plugin)
        guard = self.guard
        try:
            ran, carry, stop, raised, pending = await guard.watch(
                in_daemon_thread(
                    _run_segment,
                    segment,
                    carry,
                    args_of,
                    absorb,
                    progress,
                    name=f"mainspring-hook {hook}",
                    wait_s=HANDOVER_WAIT_S,
                ),
                progress,
                limit_s,
            )
        except BaseException as cut:
            progress.cut = True
            progress.drop()
            guard.stalled.discard(id(progress))
            if passes_through(cut, guard):
                raise
            blamed = segment[progress.at]
            guard.stalled.add(id(blamed))  # a timeout or a detachment: not called again
            return start + progress.at + 1, carry, False, failure_of(hook, blamed.plugin, cut)
        impl = segment[ran] if ran < len(segment) else segment[-1]
        if raised is not None:
            return start + ran + 1, carry, False, self._classify(hook, impl, raised)
        if pending:
            # a plain def returned an awaitable: awaited here, then folded in
            try:
                awaitable = progress.take()
                if HOOKS[hook].sync:
                    close = getattr(awaitable, "close", None)
                    if close is not None:
                        close()
                    raise HookError(hook, impl.plugin, "returned an awaitable from a sync hook")
                result = await guard.watch(awaitable, impl, limit_s)
                if result is not None:
                    carry, stop = absorb(impl, carry, result)
            except BaseException as raised_later:
                return start + ran + 1, carry, False, self._classify(hook, impl, raised_later)
            return start + ran + 1, carry, stop, None
        return start + ran, carry, stop, None

    def _classify(self, hook: str, impl: Implementation, raised: BaseException) -> HookError:
        """``raised`` as ``impl``'s failure; re-raises what passes through."""
        if passes_through(raised, self.guard):
            raise raised
        return failure_of(hook, impl.plugin, raised)

    # -- context ----------------------------------------------------------------------------

    async def _chain_messages(
        self,
        hook: str,
        messages: tuple[Any, ...],
        rest: tuple[Any, ...],
        report: Report,
        sendable: bool = False,
    ) -> tuple[Any, ...]:
        plan = self.relay.plan(hook)
        if not plan:
            return messages
        last = plan[-1]
        check = self.check_transcript
        converting = hook == "convert_to_llm"

        def args_of(current: tuple[Any, ...]) -> tuple[Any, ...]:
            return (current, *rest)

        def absorb(impl: Implementation, current: Any, result: Any) -> tuple[Any, bool]:
            if result is None:
                return current, False
            candidate = as_tuple(result, hook, impl.plugin)
            if not impl.trusted:
                # custom roles may flow between converters; the last one must hand the
                # provider LLM messages only
                problem = check(candidate, llm_only=converting and impl is last)
                if problem:
                    raise HookError(hook, impl.plugin, f"broke the transcript: {problem}")
            return candidate, False

        async def failed(error: HookError, current: Any) -> tuple[Any, bool]:
            await report(error, "skipped; its input was passed on unchanged")
            return current, True

        span = None
        if sendable and last.trusted:
            # the built-in converter would hand messages known to be sendable back
            # unchanged: it is called only if a plugin's converter changed them
            plugins = (0, len(plan) - 1)
            converted: tuple[Any, ...] = await self._drive(
                hook, messages, args_of, absorb, failed, span=plugins
            )
            if converted is messages:
                return messages
            span = (len(plan) - 1, len(plan))
        else:
            converted = messages
        result: tuple[Any, ...] = await self._drive(
            hook, converted, args_of, absorb, failed, span=span
        )
        return result

    async def transform_context(
        self, messages: tuple[Any, ...], agent: Any, signal: AbortSignal, report: Report
    ) -> tuple[Any, ...]:
        """Chain ``transform_context``; a failing implementation is skipped."""
        return await self._chain_messages("transform_context", messages, (agent, signal), report)

    async def convert_to_llm(
        self, messages: tuple[Any, ...], agent: Any, report: Report, *, sendable: bool = False
    ) -> tuple[Any, ...]:
        """Chain ``convert_to_llm``; a failing implementation is skipped.

        ``sendable`` says the kernel knows ``messages`` holds LLM messages only, none of
        them failed: the essential built-in converter would return them unchanged, so it
        is not called when no plugin converter is installed.
        """
        return await self._chain_messages("convert_to_llm", messages, (agent,), report, sendable)

    async def count_tokens(
        self,
        messages: tuple[Any, ...],
        model: Model,
        report: Report,
        fallback: Callable[[tuple[Any, ...]], int],
        *,
        known: Callable[[], int] | None = None,
    ) -> int:
        """The first non-``None`` count; ``fallback(messages)`` when every one fails.

        ``known()`` is the built-in estimate of ``messages`` kept by the kernel: the
        built-in implementation (which answers last) is then not asked, and when no
        plugin answers, ``known()`` is the answer.
        """
        span = None
        if known is not None:
            # the kernel's fallbacks sort last: the plugins are the plan's head
            plugins = self.relay.calls("count_tokens").plugins
            if not plugins:
                return known()
            span = (0, plugins)
        args = (messages, model)

        def absorb(impl: Implementation, count: Any, result: Any) -> tuple[Any, bool]:
            if result is None:
                return None, False
            if isinstance(result, bool) or not isinstance(result, int):
                raise HookError("count_tokens", impl.plugin, f"returned {result!r}")
            return result, True

        async def failed(error: HookError, count: Any) -> tuple[Any, bool]:
            await report(error, "ignored; the built-in estimate was used")
            return None, True

        counted = await self._drive("count_tokens", None, args, absorb, failed, span=span)
        if counted is None:
            return known() if known is not None else fallback(messages)
        return int(counted)

    async def compact(
        self,
        messages: tuple[Any, ...],
        model: Model,
        reason: str,
        agent: Any,
        signal: AbortSignal,
    ) -> tuple[CompactionResult, str] | None:
        """The first non-``None`` result and the plugin that returned it.

        Raises :class:`HookError` (naming the plugin) on a failure.
        """
        args = (messages, model, reason, agent, signal)
        check = self.check_transcript

        def absorb(impl: Implementation, won: Any, result: Any) -> tuple[Any, bool]:
            if result is None:
                return None, False
            if not isinstance(result, CompactionResult):
                raise HookError("compact", impl.plugin, f"returned {type(result).__name__}")
            candidate = as_tuple(result.messages, "compact", impl.plugin)
            problem = check(candidate)
            if problem:
                raise HookError("compact", impl.plugin, f"broke the transcript: {problem}")
            return (CompactionResult(candidate, result.summary, result.details), impl.plugin), True

        async def failed(error: HookError, won: Any) -> tuple[Any, bool]:
            raise error

        won: tuple[CompactionResult, str] | None = await self._drive(
            "compact", None, args, absorb, failed
        )
        return won

    # -- tools ------------------------------------------------------------------------------

    async def before_tool_call(
        self,
        call: ToolCall,
        args: Any,
        tool: Tool,
        agent: Any,
        signal: AbortSignal,
        report: Report,
        revalidate: Callable[[Any], Any] | None = None,
        *,
        provenance: Any = None,
        labels: Any = None,
    ) -> GateDecision:
        """The first ``Block`` wins; a failing gate blocks (fail closed).

        ``args`` are what the gates see (a read-only view: no gate can change what the
        tool runs with). An ``Edit`` replaces the call's arguments with
        ``revalidate(arguments)`` (the tool's validation; what it raises blocks the call);
        the later gates see the edited call. ``provenance`` and ``labels`` are handed to
        the gates that take them.
        """
        if not self.relay.has("before_tool_call"):
            return _ALLOWED
        state = _Gating(call, args)

        def args_of(current: _Gating) -> tuple[Any, ...]:
            return (current.call, current.args, tool, agent, signal, provenance, labels)

        def absorb(impl: Implementation, current: Any, result: Any) -> tuple[Any, bool]:
            if result is None:
                return current, False
            if isinstance(result, Block):
                current.decision = GateDecision(
                    True, impl.plugin, _text(result.reason), rule=result.rule
                )
                return current, True
            if isinstance(result, Ask):
                current.asked.append((impl.plugin, _text(result.reason), result.rule))
                return current, False
            if isinstance(result, Edit):
                current.edit(impl.plugin, result.arguments, revalidate)
                return current, False
            raise HookError(
                "before_tool_call",
                impl.plugin,
                f"returned a {type(result).__name__}, not a Block, an Ask or an Edit",
            )

        async def failed(error: HookError, current: Any) -> tuple[Any, bool]:
            await report(error, "call blocked (fail closed)")
            # a plugin's exception may carry internals: it goes to the event and the log;
            # the kernel's own findings (a timeout, changed arguments, garbage) are shown
            why = f" ({error.cause_text})" if kernel_finding(error) else ""
            reason = f"blocked: the permission gate {error.plugin!r} failed{why}"
            current.decision = GateDecision(True, error.plugin, reason)
            return current, False

        final: _Gating = await self._drive("before_tool_call", state, args_of, absorb, failed)
        return final.outcome()

    async def request_approval(
        self,
        undecided: Callable[[], tuple[Any, ...]],
        agent: Any,
        signal: AbortSignal,
        report: Report,
        deadline: float,
        take: Callable[[str, Any], None],
        refuse: Callable[[str, bool, str], None],
    ) -> None:
        """Ask each approver in turn about the calls still undecided; first answer wins.

        ``undecided()`` gives the requests still open; ``take(plugin, answers)`` checks
        and records what an approver answered (raising :class:`HookError` for garbage);
        every approver must answer before ``deadline`` (the loop's clock). One that
        raises, returns garbage or runs out of time blocks the calls it was asked about
        and did not answer, through ``refuse(plugin, timed_out, why)`` (fail closed); the
        approvers after it are not asked.
        """

        def args_of(_: Any) -> tuple[Any, ...]:
            return (undecided(), agent, signal)

        def absorb(impl: Implementation, carry: Any, answers: Any) -> tuple[Any, bool]:
            if answers is not None:
                take(impl.plugin, answers)
            return None, not undecided()

        async def failed(error: HookError, carry: Any) -> tuple[Any, bool]:
            await report(error, "the calls it was asked about are blocked (fail closed)")
            refuse(error.plugin, timed_out(error), error.cause_text)
            return None, False

        if undecided():
            await self._drive("request_approval", None, args_of, absorb, failed, deadline)

    async def after_tool_result(
        self, call: ToolCall, result: ToolResult, agent: Any, signal: AbortSignal, report: Report
    ) -> ToolResult:
        """Chain replacements; a failing filter turns the result into an error."""

        def args_of(current: ToolResult) -> tuple[Any, ...]:
            return (call, current, agent, signal)

        def absorb(impl: Implementation, current: Any, replacement: Any) -> tuple[Any, bool]:
            if replacement is None:
                return current, False
            if not isinstance(replacement, ToolResult):
                raise HookError(
                    "after_tool_result",
                    impl.plugin,
                    f"returned a {type(replacement).__name__}, not a ToolResult",
                )
            return replacement, False

        async def failed(error: HookError, current: Any) -> tuple[Any, bool]:
            await report(error, "result withheld and replaced by an error (fail closed)")
            withheld = ToolResult.error(
                f"The result of this call was withheld: the result filter "
                f"{error.plugin!r} failed ({error.cause_text})."
            )
            return withheld, False

        final: ToolResult = await self._drive("after_tool_result", result, args_of, absorb, failed)
        return final

    async def review_reply(
        self, message: Any, agent: Any, signal: AbortSignal, report: Report
    ) -> tuple[str, str] | None:
        """The first decision on a final reply: ``(plugin, text)`` to put in its place, or
        ``None`` to deliver it as it is. ``Block(reason)`` withholds it (the text says so)
        and a string replaces it; a reviewer that fails withholds it (fail closed)."""

        def absorb(impl: Implementation, decided: Any, answer: Any) -> tuple[Any, bool]:
            if isinstance(answer, Block):
                return (impl.plugin, _withheld(impl.plugin, _text(answer.reason))), True
            if isinstance(answer, str):
                return (impl.plugin, answer), True
            raise HookError(
                "review_reply",
                impl.plugin,
                f"returned a {type(answer).__name__}, not a Block or a str",
            )

        async def failed(error: HookError, decided: Any) -> tuple[Any, bool]:
            await report(error, "reply withheld (fail closed)")
            return (error.plugin, _withheld(error.plugin, "its reviewer failed")), False

        decided: tuple[str, str] | None = await self._drive(
            "review_reply", None, (message, agent, signal), absorb, failed
        )
        return decided

    async def label_tool_result(
        self, call: ToolCall, result: ToolResult, tool: Tool, agent: Any, report: Report
    ) -> Labels | None:
        """The join of every implementation's labels for ``result`` (``None``: none given).

        Every implementation is asked; one that fails (raises, returns something other
        than :class:`~mainspring.effects.Labels`, times out) adds ``untrusted``: fail
        closed.
        """

        def absorb(impl: Implementation, joined: Any, answer: Any) -> tuple[Any, bool]:
            if answer is None:
                return joined, False
            if not isinstance(answer, Labels):
                raise HookError(
                    "label_tool_result",
                    impl.plugin,
                    f"returned a {type(answer).__name__}, not Labels",
                )
            return (answer if joined is None else joined.join(answer)), False

        async def failed(error: HookError, joined: Any) -> tuple[Any, bool]:
            await report(error, "result labelled untrusted (fail closed)")
            return (UNTRUSTED if joined is None else joined.join(UNTRUSTED)), True

        labels: Labels | None = await self._drive(
            "label_tool_result", None, (call, result, tool, agent), absorb, failed
        )
        return labels

    async def filter_tool_update(
        self, call: ToolCall, partial: Any, agent: Any, signal: AbortSignal, report: Report
    ) -> tuple[bool, Any]:
        """Chain replacements of a progress report: ``(keep, partial)``.

        A failing filter withholds the update (fail closed): ``keep`` is ``False``.
        """

        def args_of(current: tuple[bool, Any]) -> tuple[Any, ...]:
            return (call, current[1], agent, signal, current[1])

        def absorb(impl: Implementation, current: Any, replacement: Any) -> tuple[Any, bool]:
            return (current if replacement is None else (True, replacement)), False

        async def failed(error: HookError, current: Any) -> tuple[Any, bool]:
            await report(error, "update withheld (fail closed)")
            return (False, None), False

        kept: tuple[bool, Any] = await self._drive(
            "filter_tool_update", (True, partial), args_of, absorb, failed
        )
        return kept

    # -- run control ------------------------------------------------------------------------

    async def should_stop_after_turn(
        self, state: Callable[[], Any], agent: Any, signal: AbortSignal
    ) -> bool:
        """Any ``True`` stops; a failure raises :class:`HookError` (a run failure).

        ``state`` makes the :class:`~mainspring.AgentState` snapshot, once, and only if
        an implementation is called.
        """
        if not self.relay.has("should_stop_after_turn"):
            return False
        args = (state(), agent, signal)

        def absorb(impl: Implementation, stop: Any, result: Any) -> tuple[Any, bool]:
            return (True, True) if result else (False, False)

        async def failed(error: HookError, stop: Any) -> tuple[Any, bool]:
            raise error

        return bool(
            await self._drive("should_stop_after_turn", False, args, absorb, failed, quiet=False)
        )

    async def prepare_next_turn(
        self,
        state: Callable[[], Any],
        agent: Any,
        signal: AbortSignal,
        report: Report,
        check: Callable[[str, Any], Any],
    ) -> tuple[Any, ...]:
        """Every implementation's change, in order, as ``check(plugin, result)`` made it
        (``None`` results are left out).

        ``check`` refuses a result by raising (a ``HookError``, or a ``TypeError`` or
        ``ValueError`` whose sentence says what is wrong); that implementation is then
        skipped like one that raised: a ``hook_error``, and nothing of its change.
        """
        if not self.relay.has("prepare_next_turn"):
            return ()
        args = (state(), agent, signal)

        def absorb(impl: Implementation, changes: Any, result: Any) -> tuple[Any, bool]:
            if result is None:
                return changes, False
            return (*changes, check(impl.plugin, result)), False

        async def failed(error: HookError, changes: Any) -> tuple[Any, bool]:
            await report(error, "skipped; the next request is not changed by it")
            return changes, True

        changes: tuple[Any, ...] = await self._drive("prepare_next_turn", (), args, absorb, failed)
        return changes

    # -- construction -----------------------------------------------------------------------

    def register_tools(self, agent: Any) -> list[tuple[str, Tool]]:
        """Every plugin's tools, with the plugin that gave each (load errors raise)."""
        from ..tools import Tool

        collected: list[tuple[str, Tool]] = []
        for impl in reversed(self.relay.plan("register_tools")):
            tools = _call_at_load("register_tools", impl, (agent,))
            for item in as_tuple(tools, "register_tools", impl.plugin) if tools else ():
                if not isinstance(item, Tool):
                    raise HookError("register_tools", impl.plugin, f"returned {item!r}, not a Tool")
                collected.append((impl.plugin, item))
        return collected

    def register_providers(self, agent: Any) -> list[tuple[str, Provider]]:
        """Every plugin's providers, in registration order (later ones win by name)."""
        collected: list[tuple[str, Provider]] = []
        for impl in reversed(self.relay.plan("register_providers")):
            providers = _call_at_load("register_providers", impl, (agent,))
            for item in as_tuple(providers, "register_providers", impl.plugin) if providers else ():
                if not isinstance(getattr(item, "name", None), str) or not callable(
                    getattr(item, "stream", None)
                ):
                    raise HookError(
                        "register_providers", impl.plugin, f"returned {item!r}, not a Provider"
                    )
                collected.append((impl.plugin, item))
        return collected


def _call_at_load(hook: str, impl: Implementation, args: tuple[Any, ...]) -> Any:
    """Call a construction-time hook's ``impl``; any failure is a :class:`HookError`
    (``KeyboardInterrupt``/``SystemExit`` pass through; there is no run to abort yet)."""
    try:
        return impl.call(args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as raised:
        raise failure_of(hook, impl.plugin, raised) from raised
