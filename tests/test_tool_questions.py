"""A running tool asks the person (``ctx.ask``): the approvers answer, never the model;
no approver, a refusal or an allow without an answer declines."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mainspring import Agent, Approval, Tool, ToolResult, hookimpl
from mainspring.questions import Answer, Question
from mainspring.testing import (
    EventRecorder,
    FauxProvider,
    check_event_grammar,
    faux,
    scripted_approver,
)

FORM = Question("the deploy tool", "Which environment?", "form", schema={
    "type": "object",
    "properties": {"env": {"type": "string", "enum": ["staging", "prod"]}},
    "required": ["env"],
})  # fmt: skip


async def deploy(args: dict[str, Any], ctx: Any) -> ToolResult:
    answer = await ctx.ask(FORM)
    assert isinstance(answer, Answer)
    if not answer.accepted:
        return ToolResult(f"not deployed: {answer.reason} ({answer.decided_by})")
    return ToolResult(f"deployed to {answer.content['env']}")


DEPLOY = Tool(name="deploy", description="Deploy.", parameters={"type": "object"}, execute=deploy)


async def run(*plugins: Any, tools: list[Tool] | None = None) -> tuple[str, EventRecorder]:
    provider = FauxProvider([faux.tool_call("deploy", {}), faux.text("ok")])
    agent = Agent(
        model="faux:test", provider=provider, tools=tools or [DEPLOY], plugins=list(plugins),
        autoload=False,
    )  # fmt: skip
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    return recorder.messages("tool_result")[0].text, recorder


async def test_an_approver_answers_a_tools_question() -> None:
    text, recorder = await run(scripted_approver(Approval(True, content={"env": "staging"})))
    assert text == "deployed to staging"
    (asked,) = [e for e in recorder.events if e.type == "tool_approval_request"]
    assert asked.question == {
        "asker": "the deploy tool",
        "message": "Which environment?",
        "mode": "form",
        "schema": FORM.schema,
    }


async def test_without_an_approver_the_question_is_declined() -> None:
    text, _ = await run()
    assert text.startswith("not deployed: ") and text.endswith("(no_approver)")


async def test_an_allow_without_content_or_outside_the_form_declines() -> None:
    text, _ = await run(scripted_approver(True))
    assert text.startswith("not deployed: allowed without an answer")
    text, _ = await run(scripted_approver(Approval(True, content={"env": "moon"})))
    assert text.startswith("not deployed: the answer does not fit")


@pytest.mark.parametrize(
    "schema",
    [{"type": "object", "properties": {"deep": {"type": "object"}}}, {"type": "string"}, None],
)
def test_a_form_must_be_flat(schema: Any) -> None:
    with pytest.raises(ValueError, match="form"):
        Question("x", "?", "form", schema=schema)


def test_a_url_question_needs_its_url() -> None:
    with pytest.raises(ValueError, match="url"):
        Question("x", "?", "url")


class SlowPerson:
    """An approver who takes ``delay_s`` to answer a question (a person reading it)."""

    CAPABILITIES = ("approve",)
    PLUGIN_NAME = "slow-person"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    @hookimpl
    async def request_approval(self, requests: Any) -> dict[str, Approval]:
        await asyncio.sleep(self.delay_s)
        return {r.tool_call_id: Approval(True, content={"env": "staging"}) for r in requests}


async def test_the_persons_time_does_not_count_against_the_tools_timeout() -> None:
    """A tool whose ``timeout_s`` is shorter than the person takes to answer its question
    still gets the answer: the deadline is held while the question waits."""
    slow_deploy = Tool(
        name="deploy", description="Deploy.", parameters={"type": "object"}, execute=deploy,
        timeout_s=0.3,
    )  # fmt: skip
    text, _ = await run(SlowPerson(delay_s=0.6), tools=[slow_deploy])
    assert text == "deployed to staging"


async def test_the_tools_deadline_runs_again_once_answered() -> None:
    """What is left of the deadline holds after the answer: a tool that then hangs is cut."""
    never = asyncio.Event()

    async def ask_then_hang(args: dict[str, Any], ctx: Any) -> ToolResult:
        answer = await ctx.ask(FORM)
        assert answer.accepted
        await never.wait()
        return ToolResult("unreachable")

    hanging = Tool(
        name="deploy", description="Deploy.", parameters={"type": "object"},
        execute=ask_then_hang, timeout_s=0.3,
    )  # fmt: skip
    text, _ = await run(SlowPerson(delay_s=0.0), tools=[hanging])
    assert "timed out after 0.3 s" in text


async def test_an_abort_ends_a_call_whose_question_holds_its_deadline() -> None:
    """The held deadline does not hold an abort: a person who never answers, then an
    abort, and the call and the run end at once."""
    never = asyncio.Event()

    class Silent:
        CAPABILITIES = ("approve",)
        PLUGIN_NAME = "silent-person"

        @hookimpl
        async def request_approval(self, requests: Any) -> dict[str, Approval]:
            await never.wait()
            return {}

    held = Tool(
        name="deploy", description="Deploy.", parameters={"type": "object"}, execute=deploy,
        timeout_s=0.3,
    )  # fmt: skip
    provider = FauxProvider([faux.tool_call("deploy", {}), faux.text("ok")])
    agent = Agent(
        model="faux:test", provider=provider, tools=[held], plugins=[Silent()], autoload=False
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    agent.subscribe(
        lambda event, signal: agent.abort() if event.type == "tool_approval_request" else None
    )
    await asyncio.wait_for(agent.prompt("go"), 10)

    check_event_grammar(recorder.events)
    assert recorder.of_type("agent_end")[0].reason == "aborted"
    (result,) = recorder.messages("tool_result")
    assert "timed out" not in result.text
