"""Approvers for tests: plugins that answer the calls a gate asked about (``Ask``).

A gate that returns :class:`~mainspring.Ask` needs someone to answer; in a test that is
one of these, passed in ``plugins=`` (or with ``@pytest.mark.mainspring_plugins``):

- :func:`approve_all` allows every call, :func:`deny_all` refuses every call;
- :func:`scripted_approver` answers the calls in the order they are asked, one answer
  each (``True``, ``False``, or an :class:`~mainspring.Approval`), or with a function of
  the :class:`~mainspring.ApprovalRequest`.

Each keeps the requests it was asked about in :attr:`ScriptedApprover.requests`. A call
asked about after the script ran out is refused, with a reason that says so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from ..contract.decisions import Approval, ApprovalRequest
from ..contract.markers import hookimpl

__all__ = ["EXHAUSTED", "ScriptedApprover", "approve_all", "deny_all", "scripted_approver"]

EXHAUSTED = "the test's approver has no answer left for this call"
"""The reason of a refusal once a script ran out."""


class ScriptedApprover:
    """A ``request_approval`` plugin answering from a script (see the module docstring).

    ``answers`` is an iterable of answers, used one per call in the order asked, or a
    function from an :class:`~mainspring.ApprovalRequest` to an answer. ``name`` is its
    plugin name (``tool_decision.decided_by`` names it).
    """

    CAPABILITIES = ("approve",)

    def __init__(
        self,
        answers: Iterable[bool | Approval] | Callable[[ApprovalRequest], bool | Approval],
        name: str = "test-approver",
    ) -> None:
        self.PLUGIN_NAME = name
        self._decide = answers if callable(answers) else None
        self._script: deque[bool | Approval] = deque(() if callable(answers) else answers)
        self.requests: list[ApprovalRequest] = []
        """Every request asked about, in order."""

    def _answer(self, request: ApprovalRequest) -> Approval:
        if self._decide is not None:
            given: Any = self._decide(request)
        elif self._script:
            given = self._script.popleft()
        else:
            return Approval(False, EXHAUSTED)
        if isinstance(given, Approval):
            return given
        return Approval(bool(given), None if given else "refused by the test's approver")

    @hookimpl
    async def request_approval(
        self, requests: tuple[ApprovalRequest, ...]
    ) -> Mapping[str, Approval]:
        """Answer each request (see the class docstring)."""
        self.requests.extend(requests)
        return {request.tool_call_id: self._answer(request) for request in requests}


def approve_all(remember: Literal["tool", "call"] | None = None) -> ScriptedApprover:
    """An approver that allows every call (``remember``: as :class:`~mainspring.Approval`)."""
    return ScriptedApprover(lambda request: Approval(True, remember=remember), "approve-all")


def deny_all(reason: str = "refused by the test's approver") -> ScriptedApprover:
    """An approver that refuses every call with ``reason`` (the model is told it)."""
    return ScriptedApprover(lambda request: Approval(False, reason), "deny-all")


def scripted_approver(
    *answers: bool | Approval, name: str = "scripted-approver"
) -> ScriptedApprover:
    """An approver that gives ``answers`` one per call, in the order the calls are asked."""
    return ScriptedApprover(answers, name)
