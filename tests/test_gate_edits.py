"""``Edit``: a gate rewrites a call's arguments; later gates see the edited call.

The edited arguments are validated against the tool's schema (invalid ones block the
call, fail closed), and the call's ``tool_decision`` names the gates that edited it, the
arguments that ran, and the rule that decided.
"""

from __future__ import annotations

from typing import Any

from mainspring import Agent, Ask, Block, Edit, hookimpl, tool
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

ran: list[str] = []


@tool
def send(to: str, body: str) -> str:
    """Send a message."""
    ran.append(f"{to}:{body}")
    return "sent"


def build(plugins: list[Any]) -> tuple[Agent, EventRecorder]:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(
            [faux.tool_call("send", {"to": "eve@evil.example", "body": "hi"}), faux.text("ok")]
        ),
        autoload=False,
        plugins=plugins,
        tools=[send],
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder


class Rewrite:
    name = "rewrite"

    @hookimpl
    def before_tool_call(self, call: Any) -> Edit:
        return Edit({**call.arguments, "to": "alice@example.com"}, "only alice", rule="recipients")


async def test_an_edit_runs_the_edited_arguments_and_later_gates_see_them() -> None:
    ran.clear()
    seen: list[Any] = []

    class Later:
        name = "later"

        @hookimpl
        def before_tool_call(self, call: Any, args: Any) -> None:
            seen.append((dict(call.arguments), args.to))

    # pluggy calls the most recently registered first: Rewrite, then Later
    agent, recorder = build([Later(), Rewrite()])
    await agent.prompt("go")

    assert ran == ["alice@example.com:hi"]
    assert seen == [({"to": "alice@example.com", "body": "hi"}, "alice@example.com")]
    (decision,) = recorder.of_type("tool_decision")
    assert decision.decision == "allow" and decision.edited_by == ("rewrite",)
    assert decision.arguments == {"to": "alice@example.com", "body": "hi"}
    # tool_execution_start shows what the model asked for; the decision what ran
    (start,) = recorder.of_type("tool_execution_start")
    assert start.args["to"] == "eve@evil.example"
    check_event_grammar(recorder.events)


async def test_an_edit_into_invalid_arguments_blocks_the_call() -> None:
    ran.clear()

    class Breaks:
        name = "breaks"

        @hookimpl
        def before_tool_call(self, call: Any) -> Edit:
            return Edit({"to": 42})

    agent, recorder = build([Breaks()])
    await agent.prompt("go")

    assert ran == []
    (decision,) = recorder.of_type("tool_decision")
    assert decision.decision == "block" and decision.plugin == "breaks"
    (error,) = recorder.of_type("hook_error")
    assert "invalid" in error.error
    check_event_grammar(recorder.events)


async def test_a_block_after_an_edit_names_its_rule_and_the_edit() -> None:
    ran.clear()

    class Refuse:
        name = "refuse"

        @hookimpl
        def before_tool_call(self, call: Any) -> Block | None:
            if call.arguments["to"].endswith("@example.com"):
                return Block("no mail today", rule="quiet-hours")
            return None

    agent, recorder = build([Refuse(), Rewrite()])
    await agent.prompt("go")

    assert ran == []
    (decision,) = recorder.of_type("tool_decision")
    assert decision.decision == "block" and decision.rule == "quiet-hours"
    assert decision.edited_by == ("rewrite",)


async def test_an_ask_carries_its_rule_and_the_approver_sees_the_edited_call() -> None:
    ran.clear()
    asked: list[Any] = []

    class Asks:
        name = "asks"

        @hookimpl
        def before_tool_call(self, call: Any) -> Ask:
            return Ask("confirm the recipient", rule="confirm-send")

    class Approver:
        name = "approver"

        @hookimpl
        def request_approval(self, requests: Any) -> dict[str, Any]:
            from mainspring import Approval

            asked.extend(requests)
            return {request.tool_call_id: Approval(True) for request in requests}

    agent, _ = build([Approver(), Asks(), Rewrite()])
    await agent.prompt("go")

    (request,) = asked
    assert request.arguments["to"] == "alice@example.com"
    assert ran == ["alice@example.com:hi"]
