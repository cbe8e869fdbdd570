"""The typed hook facade: each hook's combining rule and failure semantics, in one place.

The loop never calls ``pm.hook.x(...)``; it calls these methods, which apply the rules of
the hook table: fail soft for context shaping, fail closed for gates and result filters,
run failure for the stop policy and observers. ``report`` callbacks turn a contained
failure into a ``hook_error`` event.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from ..errors import CompactionResult, HookError
from .hook_calls import GateDecision, Report, _as_tuple, _stalled
from .invariants import transcript_problem
from .relay import GENERAL, call_plain
from .tool_hooks import ToolHooks

if TYPE_CHECKING:
    from ..providers.base import Model, Provider
    from ..signal import AbortSignal
    from ..tools import Tool
    from .estimate import RunningEstimate

__all__ = ["GateDecision", "Hooks", "Report"]


@final
class Hooks(ToolHooks):
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

    __slots__ = ()

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
                if impl.off_loop:
                    result = await self.off_loop(impl, (current, *rest), timeout)
                else:
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
                if impl.off_loop:
                    result = await self.off_loop(impl, args, self.timeout_s, awaitable=False)
                elif impl.arity == 1:
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
                if impl.off_loop:
                    result = await self.off_loop(impl, args, timeout)
                else:
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
                if impl.off_loop:
                    stop = await self.off_loop(impl, args, timeout)
                else:
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
