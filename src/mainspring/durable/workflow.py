"""A durable run: one DBOS workflow, keyed by the run id, that drives one agent run.

The workflow builds the agent with the worker's :data:`AgentFactory` (by default: the
installed plugins, the worker's settings and config file, the model the run asked for),
records that configuration as its first step, wraps the provider and every tool in
checkpointing steps (:mod:`mainspring.durable.steps`), journals every event before it is
delivered (:mod:`mainspring.durable.journal`) and runs ``agent.prompt(prompt)``. Its
result is the run's outcome and final transcript.

After a crash DBOS runs the workflow again from the start: the model and the tools answer
from their checkpoints, so the kernel goes through the same turns, and the events up to
the last journaled one are not delivered again (:class:`~mainspring.RunOptions`).
Plugins run again too, so gates, transforms, compaction and stop policies must decide
the same way given the same checkpoints (``docs/durable.md``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from dbos import DBOS

from ..agent import Agent, RunOptions
from ..message_json import encode_message
from .approvals import DurableApprover
from .config import WORKFLOW_NAME
from .journal import Journal, RunJournal
from .steps import DurableProvider, RunCheckpoints, bind_run, durable_tool

__all__ = ["AgentFactory", "Runtime", "default_factory", "run_workflow"]

AgentFactory = Callable[[dict[str, Any]], Agent | Awaitable[Agent]]
"""Builds the agent of a run from its spec (``prompt``, ``model``, ``system_prompt``,
``options``). Called again, with the same spec, when the run is recovered."""


def default_factory(spec: dict[str, Any]) -> Agent:
    """The agent a worker builds: installed plugins, settings and config, the run's model."""
    from ..settings import load_settings

    kwargs: dict[str, Any] = {"settings": load_settings()}
    if spec.get("model"):
        kwargs["model"] = spec["model"]
    if spec.get("system_prompt"):
        kwargs["system_prompt"] = spec["system_prompt"]
    return Agent(**kwargs)


@dataclass
class Runtime:
    """What the workflows of this process use: set by the worker before DBOS launches."""

    journal: Journal | None = None
    factory: AgentFactory = default_factory
    listen: Callable[[Agent, str], None] | None = None
    """Called with each run's agent and run id: subscribe listeners here. They, like any
    subscriber the factory added, see each event once it is journaled."""
    active: dict[str, Agent] = field(default_factory=dict)
    report: Callable[[str], None] | None = None
    """Told one line when a run starts and when it settles (``mainspring worker``)."""
    approval_key: bytes = b""
    """The key decisions must be signed with (:mod:`mainspring.durable.credentials`)."""


RUNTIME = Runtime()


def _describe(agent: Agent) -> dict[str, Any]:
    """The configuration a run is recorded with (model, plugins, tools)."""
    state = agent.state
    return {
        "model": state.model.ref,
        "system_prompt": state.system_prompt,
        "plugins": [info.name for info in agent.plugins.infos],
        "tools": sorted(tool.name for tool in state.tools),
    }


async def _build(spec: dict[str, Any]) -> Agent:
    made = RUNTIME.factory(spec)
    agent = await made if isinstance(made, Awaitable) else made
    if not isinstance(agent, Agent):
        raise TypeError(f"the agent factory returned {type(agent).__name__}, not an Agent")
    return agent


@DBOS.workflow(name=WORKFLOW_NAME)
async def run_workflow(spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``spec["prompt"]`` durably; the outcome and final transcript (JSON-able)."""
    run_id = DBOS.workflow_id
    journal = RUNTIME.journal
    assert run_id is not None and journal is not None, "start a worker (mainspring.durable)"
    agent = await _build(spec)
    failures: list[BaseException] = []

    def stop(failure: BaseException) -> None:
        # the model never sees a checkpoint failure: the run stops, the workflow fails
        if not failures:
            failures.append(failure)
            agent.abort("checkpoint failed")

    checkpoints = RunCheckpoints(stop)
    recorder = RunJournal(journal, run_id, checkpoints.fail)
    checkpoints.journal = recorder
    try:
        described = _describe(agent)

        async def configuration() -> dict[str, Any]:
            return described

        recorded = await DBOS.run_step_async({"name": "mainspring.config"}, configuration)
        if recorded != described:
            # the worker's plugins or config changed since the run started: say so, go on
            DBOS.logger.warning(f"run {run_id}: configuration differs from the recorded one")
        approver = DurableApprover(RUNTIME.approval_key, checkpoints)
        agent.plugins.pm.register(approver, name="durable-approvals")
        for tool in agent.state.tools:
            durable_tool(tool)  # in place: gates see the objects the plugins registered
        bind_run(checkpoints)
        delivered = await asyncio.to_thread(journal.last_seq, run_id)
        replay = RunOptions(
            run_id,
            delivered,
            DurableProvider(agent.provider),
            recorder=_journaling(agent, recorder, checkpoints),
        )
        if RUNTIME.listen is not None:
            RUNTIME.listen(agent, run_id)
        RUNTIME.active[run_id] = agent
        if RUNTIME.report is not None:
            RUNTIME.report(f"run {run_id} started ({'resumed' if delivered else 'new'})")
        end = await agent.prompt(spec["prompt"], options=replay)
        if RUNTIME.report is not None:
            RUNTIME.report(
                f"run {run_id} settled: {end.reason}, {agent.state.turns_completed} turns"
            )
        if failures:
            raise failures[0]
        state = agent.state
        return {
            "reason": end.reason,
            "detail": end.detail,
            "turns": state.turns_completed,
            "configuration": recorded,
            "messages": [encode_message(message) for message in state.messages],
        }
    finally:
        checkpoints.close()
        RUNTIME.active.pop(run_id, None)
        await recorder.close()
        await agent.aclose()


def _journaling(
    agent: Agent, recorder: RunJournal, checkpoints: RunCheckpoints
) -> Callable[[Any, Any], Awaitable[Any] | None]:
    """The recorder of a durable run, ahead of every subscriber: records each event, and
    writes it before anyone else sees it (a subscriber or an ``on_event`` observer; the
    end of a call that ran live once its step checkpointed the final result). An event
    nobody else sees is written with the next batch (:mod:`mainspring.durable.journal`)."""

    async def call_ended(event: Any) -> None:
        await checkpoints.call_ended(event.tool_call_id, event.result)
        if not checkpoints.failed:
            recorder.record(event)
            if agent.observed:
                await recorder.flush()

    def journal_event(event: Any, signal: Any) -> Awaitable[Any] | None:
        if checkpoints.failed:
            return None  # this execution is over (cancelled, taken over): it journals nothing
        if event.type == "tool_execution_end" and event.tool_call_id in checkpoints.ending:
            return call_ended(event)
        recorder.record(event)
        if event.type == "agent_end" or agent.observed:
            return recorder.flush()
        return None

    return journal_event
