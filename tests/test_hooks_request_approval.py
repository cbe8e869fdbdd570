"""Approval: a gate may ask (``Ask``), and an approver or ``agent.approve()`` decides.

Contract (``request_approval`` hookspec, ``settings.approvals``): a ``Block`` anywhere wins
over an approval; calls asked about in one batch are asked together; the first answer
for a call wins; every decision is a ``tool_decision`` saying who decided; everything
fails closed (no approver, an approver that raises or times out, no answer in time);
``abort()`` while waiting settles at once; ``remember`` allows later calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from mainspring import (
    Agent,
    Approval,
    ApprovalRequest,
    Ask,
    Block,
    Settings,
    hookimpl,
    tool,
)
from mainspring.events import (
    AgentEnd,
    HookErrorEvent,
    ToolApprovalRequest,
    ToolDecision,
    ToolExecutionEnd,
)
from mainspring.settings import ApprovalSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

RAN: list[str] = []


@tool
def deploy(target: str) -> str:
    """Deploy to a target."""
    RAN.append(target)
    return f"deployed {target}"


class AskGate:
    name = "ask-gate"

    @hookimpl
    def before_tool_call(self, call: Any) -> Ask:
        return Ask(f"deploying needs a person ({call.id})")


class Approver:
    """Answers from a table; records what it was asked about."""

    name = "table-approver"

    def __init__(self, answers: Mapping[str, Approval]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, ...]] = []

    @hookimpl
    async def request_approval(
        self, requests: tuple[ApprovalRequest, ...]
    ) -> Mapping[str, Approval]:
        self.asked.append(tuple(r.tool_call_id for r in requests))
        return {
            r.tool_call_id: self.answers[r.tool_call_id]
            for r in requests
            if r.tool_call_id in self.answers
        }


def batch(*ids: str) -> list[Any]:
    calls = [faux.tool_call("deploy", {"target": call_id}, id=call_id) for call_id in ids]
    return [faux.reply(*calls), faux.text("done")]


async def run(
    steps: list[Any], plugins: list[Any], settings: Settings | None = None
) -> tuple[Agent, EventRecorder]:
    RAN.clear()
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        autoload=False,
        tools=[deploy],
        plugins=plugins,
        settings=settings,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await asyncio.wait_for(agent.prompt("go"), 20)
    check_event_grammar(recorder.events)
    return agent, recorder


def decisions(recorder: EventRecorder) -> dict[str, tuple[str, str, str | None]]:
    return {
        d.tool_call_id: (d.decision, d.decided_by, d.plugin) for d in recorder.of_type(ToolDecision)
    }


async def test_parallel_calls_are_asked_together_and_decided_one_by_one() -> None:
    approver = Approver({"a": Approval(True), "b": Approval(False, reason="not today")})
    _, recorder = await run(batch("a", "b"), [AskGate(), approver])

    assert approver.asked == [("a", "b")]
    requests = recorder.of_type(ToolApprovalRequest)
    assert [(r.tool_call_id, r.plugin) for r in requests] == [("a", "ask-gate"), ("b", "ask-gate")]
    assert requests[0].args == {"target": "a"}
    assert decisions(recorder) == {
        "a": ("allow", "approver", "table-approver"),
        "b": ("block", "approver", "table-approver"),
    }
    assert RAN == ["a"]
    ends = {e.tool_call_id: e for e in recorder.of_type(ToolExecutionEnd)}
    assert ends["b"].is_error and "not today" in ends["b"].result.text


async def test_a_block_from_any_gate_wins_over_an_approval() -> None:
    class Blocker:
        name = "blocker"

        @hookimpl(trylast=True)
        def before_tool_call(self) -> Block:
            return Block("never")

    approver = Approver({"a": Approval(True)})
    _, recorder = await run(batch("a"), [AskGate(), Blocker(), approver])

    assert approver.asked == []
    assert decisions(recorder) == {"a": ("block", "gate", "blocker")}
    assert RAN == []


async def test_no_approver_blocks_at_once() -> None:
    _, recorder = await run(batch("a"), [AskGate()])

    assert decisions(recorder) == {"a": ("block", "no_approver", None)}
    assert RAN == []


async def test_the_first_answer_wins_and_later_approvers_see_only_the_rest() -> None:
    first = Approver({"a": Approval(True)})
    first.name = "first"
    second = Approver({"a": Approval(False), "b": Approval(True)})
    second.name = "second"
    # registered later = called first (pluggy's order): second is asked first
    _, recorder = await run(batch("a", "b"), [AskGate(), first, second])

    assert second.asked == [("a", "b")]
    assert first.asked == []
    assert decisions(recorder) == {
        "a": ("block", "approver", "second"),
        "b": ("allow", "approver", "second"),
    }


@pytest.mark.parametrize("failure", ["raises", "garbage"])
async def test_a_failing_approver_blocks_its_calls(failure: str) -> None:
    class Broken:
        name = "broken-approver"

        @hookimpl
        def request_approval(self) -> Any:
            if failure == "raises":
                raise RuntimeError("no terminal")
            return ["yes"]

    _, recorder = await run(batch("a"), [AskGate(), Broken()])

    assert decisions(recorder) == {"a": ("block", "approver", "broken-approver")}
    assert [e.hook for e in recorder.of_type(HookErrorEvent)] == ["request_approval"]
    assert RAN == []


async def test_an_approver_that_never_answers_times_out_and_blocks() -> None:
    class Silent:
        name = "silent"

        @hookimpl
        async def request_approval(self) -> None:
            await asyncio.Event().wait()

    settings = Settings(approvals=ApprovalSettings(timeout_s=0.05))
    _, recorder = await run(batch("a"), [AskGate(), Silent()], settings)

    assert decisions(recorder) == {"a": ("block", "timeout", "silent")}
    assert RAN == []


async def test_the_api_answers_a_waiting_call() -> None:
    settings = Settings(approvals=ApprovalSettings(api=True))
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(batch("a", "b")),
        autoload=False,
        tools=[deploy],
        plugins=[AskGate()],
        settings=settings,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)

    def answer(event: Any, signal: Any) -> None:
        if isinstance(event, ToolApprovalRequest) and event.tool_call_id == "b":
            # both are waiting once the second request is out
            agent.approve("a", True, remember="tool")
            agent.approve("b", False, reason="wrong target")
            with pytest.raises(ValueError, match="already decided"):
                agent.approve("a", False)

    agent.subscribe(answer)
    RAN.clear()
    await asyncio.wait_for(agent.prompt("go"), 20)

    check_event_grammar(recorder.events)
    assert decisions(recorder) == {"a": ("allow", "api", "api"), "b": ("block", "api", "api")}
    assert RAN == ["a"]
    assert [(r.tool_name, r.arguments) for r in agent.remembered_approvals] == [("deploy", None)]
    with pytest.raises(ValueError, match="waiting for approval"):
        agent.approve("a", True)


async def test_the_api_without_an_answer_times_out() -> None:
    settings = Settings(approvals=ApprovalSettings(api=True, timeout_s=0.05))
    _, recorder = await run(batch("a"), [AskGate()], settings)

    assert decisions(recorder) == {"a": ("block", "timeout", None)}


async def test_remembered_approvals_allow_later_calls_without_asking() -> None:
    approver = Approver({"a": Approval(True, remember="call"), "c": Approval(False)})
    steps = [
        *batch("a")[:1],
        faux.tool_call("deploy", {"target": "a"}, id="a2"),
        faux.tool_call("deploy", {"target": "c"}, id="c"),
        faux.text("done"),
    ]
    _, recorder = await run(steps, [AskGate(), approver])

    assert approver.asked == [("a",), ("c",)]
    assert decisions(recorder) == {
        "a": ("allow", "approver", "table-approver"),
        "a2": ("allow", "remembered", None),
        "c": ("block", "approver", "table-approver"),
    }
    assert RAN == ["a", "a"]


async def test_abort_while_waiting_for_approval_settles_at_once() -> None:
    entered = asyncio.Event()

    class Waiting:
        name = "waiting"

        @hookimpl
        async def request_approval(self) -> None:
            entered.set()
            await asyncio.Event().wait()

    agent = Agent(
        model="faux:test",
        provider=FauxProvider(batch("a")),
        autoload=False,
        tools=[deploy],
        plugins=[AskGate(), Waiting()],
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    RAN.clear()
    task = asyncio.ensure_future(agent.prompt("go"))
    await entered.wait()
    agent.abort()
    await asyncio.wait_for(task, 10)

    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert RAN == []
    results = [m for m in agent.state.messages if m.role == "tool_result"]
    assert [r.tool_call_id for r in results] == ["a"] and results[0].is_error


async def test_remembered_approvals_are_recorded_in_the_session_and_restored(
    tmp_path: Any,
) -> None:
    path = tmp_path / "session.jsonl"
    approver = Approver({"a": Approval(True, remember="tool")})
    settings = Settings(session_path=str(path))
    first, _ = await run(batch("a"), [AskGate(), approver], settings)
    await first.wait_for_idle()

    resumed = Agent.from_session(
        path,
        provider=FauxProvider([faux.tool_call("deploy", {"target": "z"}, id="z"), faux.text("ok")]),
        autoload=False,
        tools=[deploy],
        plugins=[AskGate()],
    )
    assert [(r.tool_name, r.arguments) for r in resumed.remembered_approvals] == [("deploy", None)]
    recorder = EventRecorder()
    resumed.subscribe(recorder)
    RAN.clear()
    await resumed.prompt("again")

    check_event_grammar(recorder.events)
    assert decisions(recorder) == {"z": ("allow", "remembered", None)}
    assert RAN == ["z"]
    lines = path.read_text().splitlines()
    assert sum('"type":"approval"' in line for line in lines) == 1
