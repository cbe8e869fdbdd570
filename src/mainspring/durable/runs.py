"""Submitting and inspecting durable runs from any process (no worker needed).

:class:`Runs` talks to the runs' database through a DBOS client: it enqueues runs,
lists them with their status, reads their transcript and events, and sends approval
decisions. It never executes a run.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dbos import DBOSClient, EnqueueOptions
from dbos.cli.migration import run_dbos_database_migrations

from ..message_json import decode_message
from .approvals import APPROVAL_TOPIC, approval_message, arguments_digest
from .config import (
    APP_NAME,
    APP_VERSION,
    DEFAULT_QUEUE,
    WORKFLOW_NAME,
    check_database,
    database_url,
    is_sqlite,
    secure_sqlite_file,
)
from .credentials import load_approval_key, sign
from .heartbeats import STALE_S, live_workers
from .journal import Journal
from .serialization import JSON_ROWS

__all__ = ["ApprovalRefused", "RunInfo", "Runs"]

FINISHED = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})

FOLLOW_POLL_S = 0.2
"""How often :meth:`Runs.follow` looks for new events while there are none (seconds)."""

FOLLOW_PAGE = 1000
"""The most journal rows :meth:`Runs.follow` reads at once (a long backlog in pages)."""


class ApprovalRefused(ValueError):
    """A decision that cannot be sent: the run settled, or the call is not waiting or
    was already decided."""


@dataclass(frozen=True)
class RunInfo:
    """One durable run as ``mainspring runs`` lists it.

    ``status`` is DBOS's (``ENQUEUED``, ``PENDING`` while a worker runs it, ``SUCCESS``
    once the run settled, whatever its outcome, ``ERROR`` if the workflow itself failed,
    ``CANCELLED``); ``reason`` is the run's ``agent_end`` reason once settled; ``turns``
    the turns ended so far; ``last_error`` the failure text, if any.
    """

    run_id: str
    status: str
    prompt: str
    model: str | None
    turns: int
    reason: str | None
    last_error: str | None
    created_at: int | None
    updated_at: int | None
    executor_id: str | None

    @property
    def finished(self) -> bool:
        """Whether the run will not change any more."""
        return self.status in FINISHED


class Runs:
    """A handle on the durable runs of one database (``url`` as in :func:`database_url`)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = database_url(url)
        if is_sqlite(self.url):
            secure_sqlite_file(self.url)
        check_database(self.url)  # a misspelled name is an error, never a new database
        # a client never creates the schema; the first user of a database does
        run_dbos_database_migrations(self.url)
        self.client = DBOSClient(
            system_database_url=self.url, application_name=APP_NAME, serializer=JSON_ROWS
        )
        self.journal = Journal(self.url)

    def close(self) -> None:
        """Release the connections."""
        self.client.destroy()
        self.journal.close()

    def __enter__(self) -> Runs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(
        self,
        prompt: str,
        *,
        model: str | None = None,
        system_prompt: str | None = None,
        options: dict[str, Any] | None = None,
        queue: str = DEFAULT_QUEUE,
        run_id: str | None = None,
    ) -> str:
        """Enqueue a run of ``prompt``; its id. Submitting an id again with the same
        prompt returns it again; with another prompt is a ``ValueError``."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("a run needs a prompt that is not empty")
        chosen = run_id or uuid.uuid4().hex[:16]
        if run_id is not None:
            found = self.client.list_workflows(workflow_ids=[run_id], name=WORKFLOW_NAME)
            if found and _spec(found[0].input).get("prompt") != prompt:
                raise ValueError(f"run {run_id} exists with another prompt; choose another id")
        spec = {
            "prompt": prompt,
            "model": model,
            "system_prompt": system_prompt,
            "options": dict(options or {}),
        }
        enqueue: EnqueueOptions = {
            "workflow_name": WORKFLOW_NAME,
            "queue_name": queue,
            "workflow_id": chosen,
            "app_version": APP_VERSION,
        }
        self.client.enqueue(enqueue, spec)
        return chosen

    def approve(
        self,
        run_id: str,
        tool_call_id: str,
        decision: str,
        *,
        arguments: Any = None,
        reason: str | None = None,
        remember: str | None = None,
    ) -> None:
        """Decide the call ``tool_call_id`` of ``run_id`` (``decision``: ``"allow"`` or
        ``"deny"``), for the arguments it was asked about, or for ``arguments`` exactly.

        Without ``arguments`` the call must be waiting (its ``tool_approval_request`` is
        journaled and undecided); with them the decision may be sent before the call asks,
        and decides only a call with exactly these arguments. The decision is signed with
        the database's approval key (:mod:`mainspring.durable.credentials`). ``KeyError``
        for an unknown run; :class:`ApprovalRefused` for a settled run, a call that is not
        waiting, or one already decided; ``MissingApprovalKey`` without the key;
        ``ValueError`` for a decision other than allow/deny.
        """
        approval_message(tool_call_id, "", decision, reason, remember)  # checks first
        key = load_approval_key(self.url)
        info = self.get(run_id)
        if info.finished:
            raise ApprovalRefused(f"run {run_id} has settled; it has no call to decide")
        asked: dict[str, Any] = {}  # digest -> arguments, of calls with this id still waiting
        decided: set[str] = set()
        for event in self.journal.read_events(run_id):
            if event.get("tool_call_id") != tool_call_id:
                continue
            if event["type"] == "tool_approval_request":
                asked[arguments_digest(event.get("args"))] = event.get("args")
            elif event["type"] == "tool_decision":
                for digest in list(asked):
                    decided.add(digest)
                    del asked[digest]
        if arguments is not None:
            digest = arguments_digest(arguments)
            if digest in decided and digest not in asked:
                raise ApprovalRefused(
                    f"call {tool_call_id} of run {run_id} with these arguments was already decided"
                )
        elif asked:
            digest = next(reversed(asked))
        elif decided:
            raise ApprovalRefused(f"call {tool_call_id} of run {run_id} was already decided")
        else:
            raise ApprovalRefused(
                f"run {run_id} has no call {tool_call_id} waiting for approval; to decide "
                "a call before it asks, give its exact arguments"
            )
        message = approval_message(tool_call_id, digest, decision, reason, remember)
        message["mac"] = sign(key, run_id, message)
        self.client.send(run_id, message, APPROVAL_TOPIC)

    def live_workers(
        self, queue: str = DEFAULT_QUEUE, stale_s: float = STALE_S
    ) -> builtins.list[str]:
        """The executor ids of the workers of ``queue`` seen in the last ``stale_s``
        seconds (see :mod:`mainspring.durable.heartbeats`)."""
        return live_workers(self.journal.engine, queue, stale_s)

    def cancel(self, run_id: str) -> None:
        """Cancel a run that has not settled (it stops at its next step); ``KeyError``
        for an unknown run; a settled run is left as it is."""
        if not self.get(run_id).finished:
            self.client.cancel_workflow(run_id)

    def resume(self, run_id: str) -> None:
        """Resume a cancelled run where its checkpoints left it (a worker picks it up);
        ``KeyError`` for an unknown run, ``ValueError`` for one that was not cancelled."""
        status = self.get(run_id).status
        if status != "CANCELLED":
            raise ValueError(f"run {run_id} is {status.lower()}, not cancelled; nothing to resume")
        self.client.resume_workflow(run_id)

    def _info(self, status: Any) -> RunInfo:
        spec = _spec(status.input)
        output = status.output if isinstance(status.output, dict) else None
        if output is not None:
            turns, reason = int(output.get("turns", 0)), output.get("reason")
            model = (output.get("configuration") or {}).get("model")
            error = output.get("detail") if reason in ("error", "aborted") else None
        else:
            turns, error = self.journal.progress(status.workflow_id)
            reason, model = None, spec.get("model")
        if status.error is not None:
            error = f"{type(status.error).__name__}: {status.error}"
        return RunInfo(
            run_id=status.workflow_id,
            status=str(status.status),
            prompt=str(spec.get("prompt", "")),
            model=model,
            turns=turns,
            reason=reason,
            last_error=error,
            created_at=status.created_at,
            updated_at=status.updated_at,
            executor_id=status.executor_id,
        )

    def list(self, limit: int = 50, status: str | None = None) -> list[RunInfo]:
        """The latest runs, newest first."""
        found = self.client.list_workflows(
            name=WORKFLOW_NAME, limit=limit, sort_desc=True, status=status
        )
        return [self._info(item) for item in found]

    def _status(self, run_id: str) -> str:
        """The run's DBOS status alone (no transcript, no journal read)."""
        found = self.client.list_workflows(
            workflow_ids=[run_id], name=WORKFLOW_NAME, load_input=False, load_output=False
        )
        if not found:
            raise KeyError(f"no durable run {run_id!r}")
        return str(found[0].status)

    def get(self, run_id: str) -> RunInfo:
        """One run; ``KeyError`` if there is none with this id."""
        found = self.client.list_workflows(workflow_ids=[run_id], name=WORKFLOW_NAME)
        if not found:
            raise KeyError(f"no durable run {run_id!r}")
        return self._info(found[0])

    def transcript(self, run_id: str) -> builtins.list[Any]:
        """The run's messages: the final transcript once settled, else those so far."""
        found = self.client.list_workflows(workflow_ids=[run_id], name=WORKFLOW_NAME)
        if not found:
            raise KeyError(f"no durable run {run_id!r}")
        output = found[0].output
        if isinstance(output, dict) and "messages" in output:
            return [decode_message(item) for item in output["messages"]]
        events = self.journal.read_events(run_id)
        return [decode_message(e["message"]) for e in events if e["type"] == "message_end"]

    def events(self, run_id: str, after_seq: int = 0) -> builtins.list[dict[str, Any]]:
        """The run's journaled events after ``after_seq``, as JSON dicts, in order."""
        return self.journal.read_events(run_id, after_seq)

    def follow(
        self, run_id: str, after_seq: int = 0, poll_s: float = FOLLOW_POLL_S
    ) -> Iterator[dict[str, Any]]:
        """The run's journaled events after ``after_seq``, as JSON dicts, as they are
        journaled: each once, in ``seq`` order, across any crash of its workers, until its
        ``agent_end``, or until it settles without one. Each poll (every ``poll_s``
        seconds while nothing is new) reads the run's status and only the journal rows
        after the last ``seq`` yielded, so following a run costs time linear in its
        length. ``KeyError`` for an unknown run."""
        seen = after_seq
        while True:
            settled = self._status(run_id) in FINISHED  # first: no event is missed after it
            while True:
                page = self.journal.read_events(run_id, seen, limit=FOLLOW_PAGE)
                for event in page:
                    seen = event["seq"]
                    yield event
                    if event["type"] == "agent_end":
                        return
                if len(page) < FOLLOW_PAGE:
                    break
            if settled:
                return
            time.sleep(poll_s)

    def result(self, run_id: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Wait for the run to settle; its outcome (``reason``, ``detail``, ``turns``...).

        ``TimeoutError`` after ``timeout_s``; the workflow's own exception if it failed.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._status(run_id) not in FINISHED:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} has not settled after {timeout_s} s")
            time.sleep(0.05)
        output: dict[str, Any] = self.client.retrieve_workflow(run_id).get_result()
        return output


def _spec(inputs: Any) -> dict[str, Any]:
    """The spec a run was submitted with (its workflow's first argument)."""
    args = getattr(inputs, "args", None)
    if args is None and isinstance(inputs, dict):
        args = inputs.get("args")
    if args:
        first = args[0]
        if isinstance(first, dict):
            return first
    return {}
