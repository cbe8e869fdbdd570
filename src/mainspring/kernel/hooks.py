"""The typed hook facade: each hook's combining rule and failure semantics, in one place.

The loop never calls ``pm.hook.x(...)``; it calls these methods, which apply the rules of
the hook table: fail soft for context shaping, fail closed for gates and result filters,
run failure for the stop policy and observers. ``report`` callbacks turn a contained
failure into a ``hook_error`` event.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from ..errors import Approval, Ask, Block, CompactionResult, HookError, HookTimeoutError, StopRun
from ..signal import RunAborted
from ..tools import ToolResult
from .approvals import Decision, PendingApprovals, check_answers
from .guard import Guard
from .invariants import transcript_problem
from .relay import GENERAL, HookRelay, Implementation, call_plain

if TYPE_CHECKING:
    from ..messages import ToolCall
    from ..providers.base import Model, Provider
    from ..signal import AbortSignal
    from ..tools import Tool
    from .estimate import RunningEstimate
    from .events import DecidedBy

__all__ = ["GateDecision", "Hooks", "Report"]

Report = Callable[[HookError, str], Awaitable[None]]
"""``report(error, outcome)``: emit a ``hook_error`` saying what the kernel did."""


@final
@dataclass(frozen=True, slots=True)
class GateDecision:
    """The outcome of ``before_tool_call``: ``plugin`` is ``None`` when allowed.

    ``asked`` is ``(plugin, reason)`` when no gate blocked and some asked for approval
    (the first gate that asked; the reasons of all of them).
    """

    blocked: bool
    plugin: str | None = None
    reason: str | None = None
    asked: tuple[str, str] | None = None


def _as_tuple(value: Any, hook: str, plugin: str) -> tuple[Any, ...]:
    if isinstance(value, tuple):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return tuple(value)
    raise HookError(hook, plugin, f"returned {type(value).__name__}, expected a sequence")


def _attributed(hook: str, impl: Implementation, error: BaseException) -> HookError:
    """``error`` as a :class:`HookError` of ``impl`` (one that already is passes as is)."""
    if isinstance(error, HookError):
        return error
    wrapped = HookError(hook, impl.plugin, error)
    wrapped.__cause__ = error
    return wrapped


def _timed_out(error: HookError) -> bool:
    return isinstance(error.__cause__, HookTimeoutError)


def _kernel_finding(error: HookError) -> bool:
    """Whether the kernel wrote ``error``'s text (not a plugin's exception message)."""
    return error.__cause__ is None or _timed_out(error)


def _text(reason: object) -> str:
    """A gate's reason as text; a reason that is not a string is named by its type."""
    return reason if isinstance(reason, str) else f"(a {type(reason).__name__} as the reason)"


def _stalled(hook: str, impl: Implementation) -> HookError:
    return HookError(
        hook,
        impl.plugin,
        "it timed out or ignored cancellation earlier in this run, so it is not called again",
    )


@final
class Hooks:
    """Calls every hook with its combining rule and failure semantics.

    During a run, awaitable results are awaited under the run's
    :class:`~mainspring.kernel.guard.Guard` with the ``hooks.timeout_s`` deadline (see
    :meth:`begin_run`). What passes through untouched, whatever the hook: ``StopRun``,
    ``KeyboardInterrupt``/``SystemExit``, the run's own cancellation and its abort. Every
    other exception, ``BaseException`` subclasses included, is the implementation's
    failure. An implementation that timed out or was detached is not called again in the
    run: where it would be, the kernel acts as if it had failed (a gate blocks, a filter
    withholds, a transform or observer is skipped).
    """

    __slots__ = ("guard", "relay", "timeout_s")

    def __init__(self, relay: HookRelay) -> None:
        self.relay = relay
        self.guard = Guard(0.0)
        self.timeout_s: float | None = None

    def begin_run(self, guard: Guard, timeout_s: float | None) -> None:
        """Use ``guard`` and the per-call deadline ``timeout_s`` for the run starting."""
        self.guard = guard
        self.timeout_s = timeout_s

    def _failure(self, hook: str, impl: Implementation, raised: BaseException) -> HookError:
        """``raised`` as ``impl``'s failure; re-raises what must pass through."""
        if isinstance(raised, HookError):
            return raised
        if isinstance(raised, StopRun | KeyboardInterrupt | SystemExit):
            raise raised
        if isinstance(raised, RunAborted) and self.guard.aborted:
            raise raised
        if isinstance(raised, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise raised
        return _attributed(hook, impl, raised)

    async def _chain_messages(
        self,
        hook: str,
        messages: tuple[Any, ...],
        rest: tuple[Any, ...],
        report: Report,
        sendable: bool = False,
    ) -> tuple[Any, ...]:
        current = messages
        plan = self.relay.plan(hook)
        last = len(plan) - 1
        guard, timeout = self.guard, self.timeout_s
        skipped = guard.stalled
        for function, arity, is_async, index, impl in plan:
            if sendable and impl.trusted and current is messages:
                continue  # the built-in converter would hand these back unchanged
            if skipped and id(impl) in skipped:
                continue  # reported when it stalled
            try:
                if arity == 1:
                    result = function(current)
                elif arity == GENERAL:
                    result = impl.general_call((current, *rest))
                elif arity == 0:
                    result = function()
                else:
                    result = function(current, *rest[: arity - 1])
                if is_async or (result is not None and inspect.isawaitable(result)):
                    result = await guard.watch(result, impl, timeout)
                if result is None:
                    continue
                candidate = _as_tuple(result, hook, impl.plugin)
                # custom roles may flow between converters; the last one must hand the
                # provider LLM messages only
                llm_only = hook == "convert_to_llm" and index == last
                problem = None if impl.trusted else transcript_problem(candidate, llm_only=llm_only)
                if problem:
                    raise HookError(hook, impl.plugin, f"broke the transcript: {problem}")
            except BaseException as raised:
                error = self._failure(hook, impl, raised)
                await report(error, "skipped; its input was passed on unchanged")
                continue
            current = candidate
        return current

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
        is not called as long as no plugin converter changed them.
        """
        return await self._chain_messages("convert_to_llm", messages, (agent,), report, sendable)

    async def count_tokens(
        self,
        messages: tuple[Any, ...],
        model: Model,
        report: Report,
        fallback: Callable[[tuple[Any, ...]], int],
        *,
        known: RunningEstimate | None = None,
    ) -> int:
        """The first non-``None`` count; ``fallback(messages)`` when every one fails.

        ``known`` is the built-in estimate of ``messages`` kept by the kernel: when only
        the built-in implementation is left to ask, its answer is taken from there.
        """
        implementations = self.relay.implementations("count_tokens")
        if known is not None and all(impl.trusted for impl in implementations):
            return known.tokens
        args = (messages, model)
        for impl in implementations:
            try:
                if impl.arity == 1:
                    result = impl.function(messages)
                else:
                    result = call_plain("count_tokens", impl, args)
                if result is None:
                    continue
                if isinstance(result, bool) or not isinstance(result, int):
                    raise HookError("count_tokens", impl.plugin, f"returned {result!r}")
                return result
            except BaseException as raised:
                error = self._failure("count_tokens", impl, raised)
                await report(error, "ignored; the built-in estimate was used")
        return fallback(messages)

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
        guard, timeout = self.guard, self.timeout_s
        for impl in self.relay.implementations("compact"):
            if guard.stalled and id(impl) in guard.stalled:
                raise _stalled("compact", impl)
            try:
                result = impl.call(args)
                if impl.is_async or (result is not None and inspect.isawaitable(result)):
                    result = await guard.watch(result, impl, timeout)
            except BaseException as raised:
                raise self._failure("compact", impl, raised) from raised
            if result is None:
                continue
            if not isinstance(result, CompactionResult):
                raise HookError("compact", impl.plugin, f"returned {type(result).__name__}")
            candidate = _as_tuple(result.messages, "compact", impl.plugin)
            problem = transcript_problem(candidate)
            if problem:
                raise HookError("compact", impl.plugin, f"broke the transcript: {problem}")
            return CompactionResult(candidate, result.summary, result.details), impl.plugin
        return None

    async def before_tool_call(
        self,
        call: ToolCall,
        args: Any,
        tool: Tool,
        agent: Any,
        signal: AbortSignal,
        report: Report,
        fingerprint: Callable[[], Any] | None = None,
    ) -> GateDecision:
        """The first ``Block`` wins; a failing gate blocks (fail closed).

        ``fingerprint()`` (given for arguments that could be changed in place) is taken
        before the gates and after each one: a gate that changed the arguments blocks
        the call, so what runs is what every gate saw.
        """
        every = (call, args, tool, agent, signal)
        guard, timeout = self.guard, self.timeout_s
        skipped = guard.stalled
        before = fingerprint() if fingerprint is not None else None
        asked: list[tuple[str, str]] = []
        for function, arity, is_async, _, impl in self.relay.plan("before_tool_call"):
            try:
                if skipped and id(impl) in skipped:
                    raise _stalled("before_tool_call", impl)
                if arity == 1:
                    result = function(call)
                elif arity == 5:
                    result = function(call, args, tool, agent, signal)
                elif arity == GENERAL:
                    result = impl.general_call(every)
                else:
                    result = function(*every[:arity])
                if is_async or (result is not None and inspect.isawaitable(result)):
                    result = await guard.watch(result, impl, timeout)
                # a gate that is not handed the arguments cannot have changed them
                if fingerprint is not None and arity != 1 and fingerprint() != before:
                    raise HookError(
                        "before_tool_call", impl.plugin, "changed the arguments it was asked about"
                    )
            except BaseException as raised:
                error = self._failure("before_tool_call", impl, raised)
                await report(error, "call blocked (fail closed)")
                # a plugin's exception may carry internals: it goes to the event and the
                # log; the kernel's own findings (a timeout, changed arguments) are shown
                why = f" ({error.cause_text})" if _kernel_finding(error) else ""
                return GateDecision(
                    True, impl.plugin, f"blocked: the permission gate {impl.plugin!r} failed{why}"
                )
            if result is None:
                continue
            if isinstance(result, Block):
                return GateDecision(True, impl.plugin, _text(result.reason))
            if isinstance(result, Ask):
                asked.append((impl.plugin, _text(result.reason)))
                continue
            wrong = HookError(
                "before_tool_call",
                impl.plugin,
                f"returned a {type(result).__name__}, not a Block or an Ask",
            )
            await report(wrong, "call blocked (fail closed)")
            return GateDecision(True, impl.plugin, f"blocked: {wrong}")
        if asked:
            reasons = "; ".join(reason for _, reason in asked)
            return GateDecision(False, asked=(asked[0][0], reasons))
        return GateDecision(False)

    async def request_approval(
        self,
        pending: PendingApprovals,
        agent: Any,
        signal: AbortSignal,
        report: Report,
        deadline: float,
        answer: Callable[[Approval, DecidedBy, str | None], Decision],
    ) -> None:
        """Ask each approver in turn about the calls still undecided; first answer wins.

        Each is given until ``deadline`` (the loop's clock). One that raises, returns
        garbage or runs out of time blocks the calls it was asked about and did not
        answer (fail closed); the approvers after it are not asked.
        """
        guard = self.guard
        loop = asyncio.get_running_loop()
        for impl in self.relay.implementations("request_approval"):
            undecided = pending.undecided()
            if not undecided:
                return
            try:
                if guard.stalled and id(impl) in guard.stalled:
                    raise _stalled("request_approval", impl)
                answers = impl.call((undecided, agent, signal))
                if impl.is_async or (answers is not None and inspect.isawaitable(answers)):
                    left = max(deadline - loop.time(), 0.0)
                    answers = await guard.watch(answers, impl, left)
                if answers is None:
                    continue
                for call_id, approval in check_answers(answers, impl.plugin).items():
                    pending.decide(call_id, answer(approval, "approver", impl.plugin))
            except BaseException as raised:
                error = self._failure("request_approval", impl, raised)
                await report(error, "the calls it was asked about are blocked (fail closed)")
                timed_out = _timed_out(error)
                why = "no answer in time" if timed_out else f"it failed ({error.cause_text})"
                pending.decide_rest(
                    Decision(
                        False,
                        "timeout" if timed_out else "approver",
                        impl.plugin,
                        f"the approver {impl.plugin!r} did not decide: {why}",
                    )
                )
                return

    async def after_tool_result(
        self, call: ToolCall, result: ToolResult, agent: Any, signal: AbortSignal, report: Report
    ) -> ToolResult:
        """Chain replacements; a failing filter turns the result into an error."""
        current = result
        guard, timeout = self.guard, self.timeout_s
        skipped = guard.stalled
        for function, arity, is_async, _, impl in self.relay.plan("after_tool_result"):
            try:
                if skipped and id(impl) in skipped:
                    raise _stalled("after_tool_result", impl)
                if impl.single == 1:
                    replacement = function(current)
                elif arity == 2:
                    replacement = function(call, current)
                elif arity == 4:
                    replacement = function(call, current, agent, signal)
                elif arity == GENERAL:
                    replacement = impl.general_call((call, current, agent, signal))
                else:
                    replacement = function(*(call, current, agent, signal)[:arity])
                if is_async or (replacement is not None and inspect.isawaitable(replacement)):
                    replacement = await guard.watch(replacement, impl, timeout)
                if replacement is not None and not isinstance(replacement, ToolResult):
                    raise HookError("after_tool_result", impl.plugin, f"returned {replacement!r}")
            except BaseException as raised:
                error = self._failure("after_tool_result", impl, raised)
                await report(error, "result withheld and replaced by an error (fail closed)")
                return ToolResult.error(
                    f"The result of this call was withheld: the result filter "
                    f"{impl.plugin!r} failed ({error.cause_text})."
                )
            if replacement is not None:
                current = replacement
        return current

    async def filter_tool_update(
        self, call: ToolCall, partial: Any, agent: Any, signal: AbortSignal, report: Report
    ) -> tuple[bool, Any]:
        """Chain replacements of a progress report: ``(keep, partial)``.

        A failing filter withholds the update (fail closed): ``keep`` is ``False``.
        """
        current = partial
        guard, timeout = self.guard, self.timeout_s
        for impl in self.relay.implementations("filter_tool_update"):
            try:
                if guard.stalled and id(impl) in guard.stalled:
                    raise _stalled("filter_tool_update", impl)
                replacement = impl.call((call, current, agent, signal, current))
                if impl.is_async or (replacement is not None and inspect.isawaitable(replacement)):
                    replacement = await guard.watch(replacement, impl, timeout)
            except BaseException as raised:
                error = self._failure("filter_tool_update", impl, raised)
                await report(error, "update withheld (fail closed)")
                return False, None
            if replacement is not None:
                current = replacement
        return True, current

    async def should_stop_after_turn(
        self, state: Callable[[], Any], agent: Any, signal: AbortSignal
    ) -> bool:
        """Any ``True`` stops; a failure raises :class:`HookError` (a run failure).

        ``state`` makes the :class:`~mainspring.AgentState` snapshot, once, and only if
        an implementation is called.
        """
        plan = self.relay.plan("should_stop_after_turn")
        if not plan:
            return False
        snapshot = state()
        args = (snapshot, agent, signal)
        guard, timeout = self.guard, self.timeout_s
        for function, arity, is_async, _, impl in plan:
            try:
                if guard.stalled and id(impl) in guard.stalled:
                    raise _stalled("should_stop_after_turn", impl)
                if arity == 1:
                    stop = function(snapshot)
                elif arity == 3:
                    stop = function(snapshot, agent, signal)
                elif arity == GENERAL:
                    stop = impl.general_call(args)
                else:
                    stop = function(*args[:arity])
                if is_async or (
                    type(stop) is not bool and stop is not None and inspect.isawaitable(stop)
                ):
                    stop = await guard.watch(stop, impl, timeout)
            except BaseException as raised:
                raise self._failure("should_stop_after_turn", impl, raised) from raised
            if stop:
                return True
        return False

    def register_tools(self, agent: Any) -> list[tuple[str, Tool]]:
        """Every plugin's tools, with the plugin that gave each."""
        from ..tools import Tool

        collected: list[tuple[str, Tool]] = []
        for impl in reversed(self.relay.implementations("register_tools")):
            tools = call_plain("register_tools", impl, (agent,))
            for item in _as_tuple(tools, "register_tools", impl.plugin) if tools else ():
                if not isinstance(item, Tool):
                    raise HookError("register_tools", impl.plugin, f"returned {item!r}, not a Tool")
                collected.append((impl.plugin, item))
        return collected

    def register_providers(self, agent: Any) -> list[tuple[str, Provider]]:
        """Every plugin's providers, in registration order (later ones win by name)."""
        collected: list[tuple[str, Provider]] = []
        for impl in reversed(self.relay.implementations("register_providers")):
            providers = call_plain("register_providers", impl, (agent,))
            for item in (
                _as_tuple(providers, "register_providers", impl.plugin) if providers else ()
            ):
                if not isinstance(getattr(item, "name", None), str) or not callable(
                    getattr(item, "stream", None)
                ):
                    raise HookError(
                        "register_providers", impl.plugin, f"returned {item!r}, not a Provider"
                    )
                collected.append((impl.plugin, item))
        return collected
