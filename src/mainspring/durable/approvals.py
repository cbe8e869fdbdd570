"""Durable approvals: a decision that may arrive hours later, from another process.

In a durable run, a call a gate asked about (``mainspring.Ask``) waits for a message sent
to the run with :meth:`Runs.approve <mainspring.durable.Runs.approve>` (or ``mainspring
runs approve``). The wait is DBOS ``recv``: messages are stored in the database, and what
was received is checkpointed, so a worker that dies while the call waits, or after it was
decided, gets the same decision on recovery. The wait is bounded by
``settings.approvals.timeout_s`` (raise it for decisions that take hours); what is
undecided then is blocked, as always.

A decision names the run, the call id **and the digest of the call's exact arguments**
(:func:`arguments_digest`): models reuse call ids, and a decision for ``git push`` must not
decide a later ``git push --force`` sent under the same id. A decision that arrives
before its call asks (or for a later call) is kept until that call asks; a message that
is not a well-formed decision (``decision`` other than ``"allow"``/``"deny"``) decides
nothing. Every decision carries a MAC under the database's approval key, which the
model's tools never see (:mod:`mainspring.durable.credentials`); one that does not verify
decides nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from dbos import DBOS

from ..contract.decisions import Approval, ApprovalRequest
from ..contract.markers import hookimpl
from ..jsonable import to_jsonable
from .credentials import verify
from .serialization import RefusedRow
from .steps import CheckpointError, RunCheckpoints, write_journal

__all__ = [
    "APPROVAL_TOPIC",
    "DECISIONS",
    "DurableApprover",
    "approval_message",
    "arguments_digest",
]

APPROVAL_TOPIC = "mainspring.approval"
DECISIONS = ("allow", "deny")
REMEMBER = (None, "tool", "call")


def arguments_digest(arguments: Any) -> str:
    """The SHA-256 of a call's arguments as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(
        to_jsonable(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode()).hexdigest()


def approval_message(
    tool_call_id: str,
    digest: str,
    decision: str,
    reason: str | None = None,
    remember: str | None = None,
) -> dict[str, Any]:
    """The message that decides the call ``tool_call_id`` with arguments of ``digest``.

    ``ValueError`` unless ``decision`` is exactly ``"allow"`` or ``"deny"`` and
    ``remember`` is ``None``, ``"tool"`` or ``"call"``.
    """
    if not isinstance(decision, str) or decision not in DECISIONS:
        raise ValueError(f'a decision is "allow" or "deny", not {decision!r}')
    if remember not in REMEMBER:
        raise ValueError(f'remember must be None, "tool" or "call", not {remember!r}')
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise ValueError("a decision needs the id of the tool call it decides")
    if reason is not None and not isinstance(reason, str):
        raise ValueError("a decision's reason is text")
    return {
        "tool_call_id": tool_call_id,
        "arguments_sha256": digest,
        "decision": decision,
        "reason": reason,
        "remember": remember,
    }


def _decision(message: Any, key: bytes, run_id: str) -> tuple[tuple[str, str], Approval] | None:
    """The call (id, digest) a received message decides and its decision; ``None`` for a
    message that is not a well-formed decision signed with ``key`` for ``run_id``."""
    if not isinstance(message, dict) or not key or not verify(key, run_id, message):
        return None
    call, digest = message.get("tool_call_id"), message.get("arguments_sha256")
    decision, reason = message.get("decision"), message.get("reason")
    remember = message.get("remember")
    if not (isinstance(call, str) and isinstance(digest, str)) or decision not in DECISIONS:
        return None
    if remember not in REMEMBER or not (reason is None or isinstance(reason, str)):
        return None
    return (call, digest), Approval(decision == "allow", reason, remember)


class DurableApprover:
    """The ``request_approval`` of one durable run: waits for decisions (see the module).

    One instance per run: the decisions it received for calls that have not asked are
    kept here, and rebuilt on a replay (the received messages are checkpointed).
    """

    PLUGIN_NAME = "durable-approvals"
    CAPABILITIES = ("approve",)

    def __init__(self, key: bytes, checkpoints: RunCheckpoints | None = None) -> None:
        self.key = key
        self.checkpoints = checkpoints
        self.kept: dict[tuple[str, str], Approval] = {}

    @hookimpl(trylast=True)
    async def request_approval(
        self, requests: tuple[ApprovalRequest, ...], agent: Any
    ) -> Mapping[str, Approval] | None:
        """Receive decisions until every request is decided or the approval time is up."""
        if DBOS.workflow_id is None or DBOS.step_id is not None:
            return None
        waiting = {
            (request.tool_call_id, arguments_digest(request.arguments)): request.tool_call_id
            for request in requests
        }
        answers: dict[str, Approval] = {}
        for key in list(waiting):
            if key in self.kept:  # decided before it asked
                answers[waiting.pop(key)] = self.kept.pop(key)
        # the kernel blocks what is undecided at its own deadline; each recv is bounded
        # by the same setting, so a worker never waits on a run that has given up
        timeout = agent.settings.approvals.timeout_s
        if waiting:
            await write_journal()  # a person finds the requests in the journal
        while waiting:
            try:
                message = await DBOS.recv_async(APPROVAL_TOPIC, timeout_seconds=timeout)
            except RefusedRow as error:
                # a message that is not JSON stays at the head of the run's messages:
                # what is undecided is blocked, as at the deadline
                DBOS.logger.warning(f"run {DBOS.workflow_id}: {error}")
                break
            except Exception as error:  # cancelled, taken over, or the database is gone
                failed = CheckpointError(f"the approval wait failed: {error}")
                if self.checkpoints is not None:
                    self.checkpoints.fail(failed)
                raise failed from error
            except asyncio.CancelledError:
                raise
            except BaseException as error:  # DBOS: this execution must stop
                if self.checkpoints is not None and not isinstance(
                    error, (KeyboardInterrupt, SystemExit)
                ):
                    self.checkpoints.fail(error)
                raise
            if message is None:
                break
            decided = _decision(message, self.key, str(DBOS.workflow_id))
            if decided is None:
                DBOS.logger.warning(
                    f"run {DBOS.workflow_id}: ignored a decision that is malformed or not "
                    "signed with the approval key"
                )
                continue
            key, approval = decided
            if key in waiting:
                answers[waiting.pop(key)] = approval
            else:  # for a call that has not asked yet: kept until it does
                self.kept.setdefault(key, approval)
        return answers
