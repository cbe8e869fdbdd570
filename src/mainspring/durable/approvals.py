"""Durable approvals: a decision that may arrive hours later, from another process.

In a durable run, a call a gate asked about (``mainspring.Ask``) waits for a message sent
to the run with :func:`mainspring.durable.approve` (or ``mainspring runs approve``). The
wait is DBOS ``recv``: the message is stored in the database, and the decision is
checkpointed, so a worker that dies while the call waits, or after it was decided, gets
the same decision on recovery. The wait is bounded by ``settings.approvals.timeout_s``
(raise it for decisions that take hours); what is undecided then is blocked, as always.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dbos import DBOS

from ..errors import Approval, ApprovalRequest
from ..hookspecs import hookimpl
from .serialization import RefusedRow

__all__ = ["APPROVAL_TOPIC", "DurableApprover", "approval_message"]

APPROVAL_TOPIC = "mainspring.approval"


def approval_message(
    tool_call_id: str, allow: bool, reason: str | None = None, remember: str | None = None
) -> dict[str, Any]:
    """The message that decides one waiting call (what :func:`approve` sends)."""
    if remember not in (None, "tool", "call"):
        raise ValueError(f'remember must be None, "tool" or "call", not {remember!r}')
    return {"tool_call_id": tool_call_id, "allow": allow, "reason": reason, "remember": remember}


class DurableApprover:
    """The ``request_approval`` of a durable run: waits for approval messages (see module)."""

    PLUGIN_NAME = "durable-approvals"
    CAPABILITIES = ("approve",)

    @hookimpl(trylast=True)
    async def request_approval(
        self, requests: tuple[ApprovalRequest, ...], agent: Any
    ) -> Mapping[str, Approval] | None:
        """Receive messages until every request is decided or the approval time is up."""
        if DBOS.workflow_id is None or DBOS.step_id is not None:
            return None
        waiting = {request.tool_call_id for request in requests}
        answers: dict[str, Approval] = {}
        # the kernel blocks what is undecided at its own deadline; each recv is bounded
        # by the same setting, so a worker never waits on a run that has given up
        timeout = agent.settings.approvals.timeout_s
        while waiting:
            try:
                message = await DBOS.recv_async(APPROVAL_TOPIC, timeout_seconds=timeout)
            except RefusedRow as error:
                # a message that is not JSON stays at the head of the run's messages:
                # what is undecided is blocked, as at the deadline
                DBOS.logger.warning(f"run {DBOS.workflow_id}: {error}")
                break
            if message is None:
                break
            call_id = message.get("tool_call_id") if isinstance(message, dict) else None
            if call_id not in waiting:
                continue  # an answer for another batch, or sent twice
            waiting.discard(call_id)
            answers[call_id] = Approval(
                bool(message["allow"]), message.get("reason"), message.get("remember")
            )
        return answers
