"""Approvals: deciding the tool calls a gate asked about (``before_tool_call`` → ``Ask``).

For one batch, every call that no gate blocked and some gate asked about is an
:class:`~mainspring.ApprovalRequest`. A call allowed earlier with ``remember`` is allowed
at once. The others are decided together: each ``request_approval`` implementation in
turn is asked about the calls still undecided (first answer wins), and, when
``settings.approvals.api`` is on, ``agent.approve()`` may answer at any time until
``settings.approvals.timeout_s`` has passed since the batch was asked. What is still
undecided then is blocked. Everything fails closed: only ``allow`` that is ``True``
itself allows; an approver that raises or times out blocks the calls it was asked about;
no approver at all blocks at once. An abort while waiting settles at once (the waits run
under the run's guard).

An allowed call is remembered as its answer says (:class:`Remembered`): its exact
arguments, an argument's prefix or glob (:mod:`mainspring.approval_scopes`), or the
whole tool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from ..approval_scopes import ArgumentScope, same_arguments
from ..contract.decisions import Approval, ApprovalRequest
from ..contract.errors import HookError, HookTimeoutError
from ..messages import thaw
from ..questions import Answer, answer_problems
from ..signal import RunAborted

if TYPE_CHECKING:
    from ..events import DecidedBy
    from .run import Run

__all__ = [
    "Decision",
    "PendingApprovals",
    "Remembered",
    "decide_approvals",
    "decide_question",
    "remembrance",
]


@final
@dataclass(frozen=True, slots=True)
class Decision:
    """How one asked-about call was decided."""

    allow: bool
    decided_by: DecidedBy
    plugin: str | None
    reason: str | None
    remember: str | None = None
    argument: str | None = None
    pattern: str | None = None
    content: Any = None


@final
@dataclass(frozen=True, slots=True)
class Remembered:
    """An approval kept for the rest of the session: which calls of a tool it allows."""

    tool_name: str
    arguments: Any = None
    """``None``: every call of the tool; an :class:`ArgumentScope`: the calls it covers;
    else the exact (thawed) arguments."""

    def covers(self, request: ApprovalRequest) -> bool:
        """Whether this approval allows ``request``."""
        if request.tool_name != self.tool_name:
            return False
        if self.arguments is None:
            return True
        if isinstance(self.arguments, ArgumentScope):
            return self.arguments.covers(thaw(request.arguments))
        return same_arguments(thaw(request.arguments), self.arguments)

    def describe(self) -> str:
        """Which calls are allowed, in words: ``bash (calls whose command ...)``."""
        if self.arguments is None:
            return f"{self.tool_name} (every call)"
        if isinstance(self.arguments, ArgumentScope):
            return f"{self.tool_name} ({self.arguments.describe()})"
        return f"{self.tool_name} (these exact arguments)"


def remembrance(tool_name: str, arguments: Any, decision: Decision) -> Remembered:
    """What to remember of an allowed call (thawed ``arguments``) its ``decision`` remembers.

    Raises ``ValueError`` when a prefix or glob scope does not cover the call itself, or
    the decision's scope is not one :class:`~mainspring.Approval` can make (a value forged
    past its constructor).
    """
    kind, argument, pattern = decision.remember, decision.argument, decision.pattern
    if kind == "tool":
        return Remembered(tool_name)
    if kind == "call":
        return Remembered(tool_name, arguments)
    if kind in ("prefix", "glob") and isinstance(argument, str) and isinstance(pattern, str):
        scope = ArgumentScope.of_call(kind, argument, pattern, arguments)  # type: ignore[arg-type]
        return Remembered(tool_name, scope)
    raise ValueError(f"remember={kind!r} with argument={argument!r}, pattern={pattern!r}")


@final
class PendingApprovals:
    """The calls of one batch waiting for a decision; ``agent.approve()`` answers here."""

    __slots__ = ("_changed", "decisions", "requests")

    def __init__(self) -> None:
        self.requests: dict[str, ApprovalRequest] = {}
        self.decisions: dict[str, Decision] = {}
        self._changed = asyncio.Event()

    def add(self, request: ApprovalRequest) -> None:
        """A call of the batch that waits for a decision from now on."""
        self.requests[request.tool_call_id] = request

    def undecided(self) -> tuple[ApprovalRequest, ...]:
        """The requests with no decision yet, in call order."""
        return tuple(r for i, r in self.requests.items() if i not in self.decisions)

    def decide(self, call_id: str, decision: Decision) -> bool:
        """Record ``decision`` unless the call was decided already; whether it was taken."""
        if call_id not in self.requests or call_id in self.decisions:
            return False
        self.decisions[call_id] = decision
        self._changed.set()
        return True

    def decide_rest(self, decision: Decision) -> None:
        """Give ``decision`` to every call still undecided."""
        for request in self.undecided():
            self.decide(request.tool_call_id, decision)

    async def all_decided(self) -> None:
        """Return once every call has a decision."""
        while self.undecided():
            self._changed.clear()
            await self._changed.wait()


def _answer(approval: Approval, decided_by: DecidedBy, plugin: str | None) -> Decision:
    allow = approval.allow is True  # fails closed, whatever got past the constructor
    if not allow:
        return Decision(False, decided_by, plugin, approval.reason)
    remember, argument, pattern = approval.remember, approval.argument, approval.pattern
    return Decision(
        True, decided_by, plugin, approval.reason, remember, argument, pattern, approval.content
    )


def remembered(run: Run, request: ApprovalRequest) -> bool:
    """Whether an approval remembered earlier in the session allows ``request``."""
    return any(item.covers(request) for item in run.core.remembered_approvals)


async def decide_approvals(run: Run, pending: PendingApprovals) -> dict[str, Decision]:
    """Decide every call of ``pending`` (see the module); the decision of each call.

    ``agent.approve()`` may have answered some already, while the batch was prepared.
    """
    settings = run.settings.approvals
    hooks = run.hooks
    if pending.undecided():
        if not hooks.relay.has("request_approval") and not settings.api:
            reason = "a gate asked for approval, and no approver is configured"
            pending.decide_rest(Decision(False, "no_approver", None, reason))
            return pending.decisions
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.timeout_s

        def take(plugin: str, answers: Any) -> None:
            for call_id, approval in check_answers(answers, plugin).items():
                pending.decide(call_id, _answer(approval, "approver", plugin))

        def refuse(plugin: str, timed_out: bool, why: str) -> None:
            why = "no answer in time" if timed_out else f"it failed ({why})"
            pending.decide_rest(
                Decision(
                    False,
                    "timeout" if timed_out else "approver",
                    plugin,
                    f"the approver {plugin!r} did not decide: {why}",
                )
            )

        await hooks.request_approval(
            pending.undecided,
            run.agent,
            run.signal,
            run.report_hook_error,
            deadline,
            take,
            refuse,
        )
        left = deadline - loop.time()
        if settings.api and pending.undecided() and left > 0:
            with contextlib.suppress(HookTimeoutError):
                await run.guard.watch(pending.all_decided(), None, left)
    reason = f"no approver answered within {settings.timeout_s:g} s"
    pending.decide_rest(Decision(False, "timeout", None, reason))
    return pending.decisions


def approval_from_api(
    pending: PendingApprovals | None,
    call_id: str,
    allow: bool,
    remember: str | None,
    reason: str | None,
    content: Mapping[str, Any] | None = None,
) -> None:
    """``agent.approve()``: answer a waiting call (or its question, with ``content``), or
    raise ``ValueError`` saying why not."""
    if pending is None or call_id not in pending.requests:
        raise ValueError(f"no tool call {call_id!r} is waiting for approval")
    if type(allow) is not bool:
        raise ValueError(f"allow must be True or False, not {allow!r}")
    if remember not in (None, "tool", "call"):
        raise ValueError(f'remember must be None, "tool" or "call", not {remember!r}')
    question = pending.requests[call_id].question
    if content is not None and (question is None or not allow):
        raise ValueError("content answers a question, with allow=True")
    if question is not None and content is not None:
        problems = answer_problems(question, content)
        if problems:
            raise ValueError(f"the answer does not fit the question: {'; '.join(problems)}")
    approval = Approval(allow, reason, remember, content=content)  # type: ignore[arg-type]
    if not pending.decide(call_id, _answer(approval, "api", "api")):
        raise ValueError(f"tool call {call_id!r} was already decided")


def check_answers(answers: Any, plugin: str) -> Mapping[str, Approval]:
    """``answers`` from ``request_approval``, checked: a mapping of ids to ``Approval``."""
    if not isinstance(answers, Mapping):
        raise HookError(
            "request_approval", plugin, f"returned {type(answers).__name__}, not a mapping"
        )
    for call_id, approval in answers.items():
        if not isinstance(call_id, str) or not isinstance(approval, Approval):
            raise HookError(
                "request_approval", plugin, f"returned {call_id!r}: {approval!r}, not an Approval"
            )
    return answers


async def decide_question(
    run: Run, request: ApprovalRequest, announce: Callable[[], Awaitable[Any]]
) -> Answer:
    """Put a running call's question (``request.question``) to the approvers, as
    :func:`decide_approvals` does a batch; ``agent.approve()`` answers it from
    ``announce()`` on (``run.questions``). Accepted only when allowed with content that
    fits the question (:mod:`mainspring.questions`); anything else declines, an abort
    too."""
    question = request.question
    assert question is not None
    pending = PendingApprovals()
    pending.add(request)
    run.questions = pending
    try:
        await announce()
        decision = (await decide_approvals(run, pending))[request.tool_call_id]
    except RunAborted:
        return Answer(False, None, "the run was aborted", "aborted")
    finally:
        run.questions = None
    who = (decision.decided_by, decision.plugin)
    if not decision.allow:
        return Answer(False, None, decision.reason or "declined", *who)
    if decision.content is None:
        reason = "allowed without an answer (an approver that does not answer questions)"
        return Answer(False, None, reason, *who)
    problems = answer_problems(question, decision.content)
    if problems:
        return Answer(False, None, f"the answer does not fit: {'; '.join(problems)}", *who)
    return Answer(True, dict(decision.content), decision.reason, *who)
