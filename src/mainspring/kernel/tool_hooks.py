"""The hooks of a tool call: gates, approvers, result filters and progress filters.

Part of the hook facade (:class:`~mainspring.kernel.hooks.Hooks` inherits
:class:`ToolHooks`): each method applies its hook's combining rule and fails closed.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import Approval, Ask, Block, HookError
from ..tools import ToolResult
from .approvals import Decision, PendingApprovals, check_answers
from .hook_calls import (
    GateDecision,
    HookCaller,
    Report,
    _kernel_finding,
    _stalled,
    _text,
    _timed_out,
)
from .relay import GENERAL

if TYPE_CHECKING:
    from ..messages import ToolCall
    from ..signal import AbortSignal
    from ..tools import Tool
    from .events import DecidedBy

__all__ = ["ToolHooks"]


class ToolHooks(HookCaller):
    """``before_tool_call``, ``request_approval``, ``after_tool_result``, ``filter_tool_update``."""

    __slots__ = ()

    async def before_tool_call(
        self,
        call: ToolCall,
        args: Any,
        tool: Tool,
        agent: Any,
        signal: AbortSignal,
        report: Report,
        fingerprint: Callable[[], Any] | None = None,
        provenance: Any = None,
        labels: Any = None,
    ) -> GateDecision:
        """The first ``Block`` wins; a failing gate blocks (fail closed).

        ``fingerprint()`` (given for arguments that could be changed in place) is taken
        before the gates and after each one: a gate that changed the arguments blocks
        the call, so what runs is what every gate saw. ``provenance`` and ``labels`` are
        passed on to the gates that take them (see :func:`mainspring.provenance.gate_inputs`).
        """
        every = (call, args, tool, agent, signal, provenance, labels)
        guard, timeout = self.guard, self.timeout_s
        skipped = guard.stalled
        before = fingerprint() if fingerprint is not None else None
        asked: list[tuple[str, str]] = []
        for function, arity, is_async, _, impl in self.relay.plan("before_tool_call"):
            try:
                if skipped and id(impl) in skipped:
                    raise _stalled("before_tool_call", impl)
                if impl.off_loop:
                    result = await self.off_loop(impl, every, timeout)
                else:
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
                left = max(deadline - loop.time(), 0.0)
                if impl.off_loop:
                    answers = await self.off_loop(impl, (undecided, agent, signal), left)
                else:
                    answers = impl.call((undecided, agent, signal))
                    if impl.is_async or (answers is not None and inspect.isawaitable(answers)):
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
                if impl.off_loop:
                    replacement = await self.off_loop(impl, (call, current, agent, signal), timeout)
                else:
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
