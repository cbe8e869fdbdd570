"""A server's elicitations go to the approvers, never to the model, and fail closed.

The test server asks with ``greet`` (a form: name, age, newsletter) and ``sign_in`` (a
URL), over the 2026-07-28 protocol (the question travels with the call) and over
2025-11-25 (``--legacy``: the question is a request of its own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_helpers import run_agent, server_settings, settings_with

from mainspring import Agent, Approval, ApprovalRequest, Settings, hookimpl
from mainspring.mcp.elicitation import MAX_QUESTIONS
from mainspring.questions import Question
from mainspring.settings import ApprovalSettings
from mainspring.testing import (
    EventRecorder,
    FauxProvider,
    approve_all,
    check_event_grammar,
    deny_all,
    faux,
    scripted_approver,
)

PROTOCOLS = pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])
ADA = {"name": "Ada", "age": 36}


@pytest.fixture(scope="module", autouse=True)
def servers() -> Iterator[None]:
    """Both servers kept running for the module (agents of the same settings share them)."""
    holders = [
        Agent(model="faux:test", provider=FauxProvider([]), settings=settings_for(legacy),
              autoload=False)
        for legacy in (False, True)
    ]  # fmt: skip
    yield
    for holder in holders:
        asyncio.run(holder.aclose())


def settings_for(legacy: bool, **approvals: Any) -> Settings:
    extra = ("--extras", "--legacy") if legacy else ("--extras",)
    settings = settings_with(x=server_settings(*extra))
    if approvals:
        settings = settings.model_copy(update={"approvals": ApprovalSettings(**approvals)})
    return settings


def greet() -> list[Any]:
    return [faux.tool_call("greet", {}), faux.text("ok")]


@PROTOCOLS
async def test_a_form_is_answered_by_an_approver_with_the_values_entered(legacy: bool) -> None:
    approver = scripted_approver(Approval(True, content={**ADA, "newsletter": True}))
    run = await run_agent(greet(), settings_for(legacy), plugins=[approver])
    (result,) = run.recorder.messages("tool_result")
    assert result.text == "hello Ada, 36, newsletter=True"
    (request,) = approver.requests
    question = request.question
    assert isinstance(question, Question)
    assert (question.asker, question.mode, question.message) == (
        'MCP server "x"',
        "form",
        "Who is asking?",
    )
    assert question.schema is not None and set(question.schema["properties"]) == {
        "name",
        "age",
        "newsletter",
    }
    assert request.tool_name == "greet" and request.plugin == 'MCP server "x"'
    (event,) = [e for e in run.recorder.events if e.type == "tool_approval_request"]
    assert event.question["mode"] == "form" and event.tool_name == "greet"
    # the model was never asked: one request for the call, one for the final text
    assert len(run.provider.requests) == 2


@PROTOCOLS
async def test_a_url_is_answered_with_consent_and_never_opened(legacy: bool) -> None:
    approver = scripted_approver(Approval(True, content={}))
    steps = [faux.tool_call("sign_in", {}), faux.text("ok")]
    run = await run_agent(steps, settings_for(legacy), plugins=[approver])
    assert run.recorder.messages("tool_result")[0].text == "sign-in: accept"
    (request,) = approver.requests
    assert request.question is not None
    assert request.question.url == "https://example.com/login?session=1"


@PROTOCOLS
async def test_a_refusal_declines(legacy: bool) -> None:
    run = await run_agent(greet(), settings_for(legacy), plugins=[deny_all()])
    assert run.recorder.messages("tool_result")[0].text == "not answered: decline"


@PROTOCOLS
async def test_with_no_approver_it_is_declined(legacy: bool) -> None:
    run = await run_agent(greet(), settings_for(legacy))
    assert run.recorder.messages("tool_result")[0].text == "not answered: decline"


async def test_an_approver_that_allows_without_an_answer_declines() -> None:
    # an allow-all approver written for tool calls does not accept a question for anyone
    run = await run_agent(greet(), settings_for(False), plugins=[approve_all()])
    assert run.recorder.messages("tool_result")[0].text == "not answered: decline"
    steps = [faux.tool_call("sign_in", {}), faux.text("ok")]
    run = await run_agent(steps, settings_for(False), plugins=[approve_all()])
    assert run.recorder.messages("tool_result")[0].text == "sign-in: decline"


@pytest.mark.parametrize(
    "content",
    [{"name": "Ada", "age": -1}, {"name": "Ada"}, {**ADA, "extra": 1}, {**ADA, "age": {"x": 1}}],
    ids=["out-of-range", "missing", "unknown-field", "nested"],
)
async def test_values_that_do_not_fit_the_form_decline(content: dict[str, Any]) -> None:
    approver = scripted_approver(Approval(True, content=content))
    run = await run_agent(greet(), settings_for(False), plugins=[approver])
    assert run.recorder.messages("tool_result")[0].text == "not answered: decline"


@PROTOCOLS
async def test_agent_approve_answers_a_question(legacy: bool) -> None:
    provider = FauxProvider(greet())
    agent = Agent(
        model="faux:test", provider=provider, settings=settings_for(legacy, api=True),
        autoload=False,
    )  # fmt: skip
    recorder = EventRecorder()
    agent.subscribe(recorder)
    refused: list[str] = []

    def answer(event: Any, signal: Any) -> None:
        if event.type == "tool_approval_request" and event.question is not None:
            try:  # values that do not fit are refused at once, saying why
                agent.approve(event.tool_call_id, True, content={"name": "Ada", "age": "old"})
            except ValueError as error:
                refused.append(str(error))
            agent.approve(event.tool_call_id, True, content=ADA)

    agent.subscribe(answer)
    async with agent:
        await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert recorder.messages("tool_result")[0].text == "hello Ada, 36, newsletter=False"
    assert refused and "age" in refused[0]


async def test_nobody_answering_in_time_declines() -> None:
    run = await run_agent(greet(), settings_for(False, api=True, timeout_s=0.2))
    assert run.recorder.messages("tool_result")[0].text == "not answered: decline"


class Waiting:
    """An approver that waits until it is cancelled."""

    def __init__(self) -> None:
        self.asked = asyncio.get_running_loop().create_future()
        self.cancelled = False

    @hookimpl
    async def request_approval(self, requests: tuple[ApprovalRequest, ...]) -> dict[str, Approval]:
        self.asked.set_result(requests)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return {}


@PROTOCOLS
async def test_an_abort_while_a_question_waits_settles_the_call(legacy: bool) -> None:
    waiting = Waiting()
    provider = FauxProvider(greet())
    agent = Agent(
        model="faux:test", provider=provider, settings=settings_for(legacy), plugins=[waiting],
        autoload=False,
    )  # fmt: skip
    recorder = EventRecorder()
    agent.subscribe(recorder)
    async with agent:
        running = asyncio.ensure_future(agent.prompt("go"))
        await waiting.asked
        agent.abort("stop")
        await running
        # the server is free again: the next call is answered at once
        await agent.wait_for_idle()
    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.is_error and "aborted" in result.text
    assert waiting.cancelled


async def test_a_server_that_keeps_asking_is_declined_past_the_limit() -> None:
    approver = scripted_approver(*[Approval(True, content=ADA)] * 8)
    steps = [faux.tool_call("pester", {}), faux.text("ok")]
    run = await run_agent(steps, settings_for(True), plugins=[approver])
    actions = run.recorder.messages("tool_result")[0].text.split()
    assert actions == ["accept"] * MAX_QUESTIONS + ["decline"] * (8 - MAX_QUESTIONS)
    assert len(approver.requests) == MAX_QUESTIONS


@PROTOCOLS
async def test_with_two_calls_in_flight_the_asking_call_is_known_or_nobody_is_asked(
    legacy: bool,
) -> None:
    # 2026-07-28: the question travels with its call; 2025-11-25 does not say which call
    # asked, so with two in flight nobody is asked
    approver = scripted_approver(Approval(True, content=ADA))
    steps = [
        faux.reply(faux.tool_call("slow", {"seconds": 60}), faux.tool_call("greet", {})),
        faux.text("ok"),
    ]
    provider = FauxProvider(steps)
    agent = Agent(
        model="faux:test", provider=provider, settings=settings_for(legacy), plugins=[approver],
        autoload=False,
    )  # fmt: skip
    recorder = EventRecorder()
    agent.subscribe(recorder)

    def stop_when_greeted(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_end" and event.tool_name == "greet":
            agent.abort("enough")  # the slow call is not waited for

    agent.subscribe(stop_when_greeted)
    async with agent:
        await agent.prompt("go")
    check_event_grammar(recorder.events)
    ends = [e for e in recorder.events if e.type == "tool_execution_end"]
    (greeted,) = [e.result.text for e in ends if e.tool_name == "greet"]
    if legacy:
        assert greeted == "not answered: decline" and approver.requests == []
    else:
        assert greeted == "hello Ada, 36, newsletter=False"
        assert [request.tool_name for request in approver.requests] == ["greet"]
