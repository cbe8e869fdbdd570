"""Sampling: off by default; when a server has a budget, its requests go to the agent's
own model once the person allows each one, within the budget, and nothing else of the
agent (its transcript, tools, system prompt) is sent."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_helpers import run_agent, server_settings, settings_with

from mainspring import Agent, Approval
from mainspring.messages import UserMessage
from mainspring.settings import Settings
from mainspring.testing import FauxProvider, deny_all, faux, scripted_approver

YES = Approval(True, content={})


def settings_for(budget: int, legacy: bool = False) -> Settings:
    extra = ("--extras", "--legacy") if legacy else ("--extras",)
    return settings_with(x=server_settings(*extra, sampling_budget=budget))


def muse(times: int = 1) -> list[Any]:
    return [faux.tool_call("muse", {"topic": "tea"}) for _ in range(times)]


@pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])
async def test_an_allowed_request_is_answered_by_the_agents_model(legacy: bool) -> None:
    approver = scripted_approver(YES)
    steps = [*muse(), faux.text("Steam rises, leaves unfurl, and more"), faux.text("done")]
    run = await run_agent(steps, settings_for(2, legacy), plugins=[approver],
                          system_prompt="the agent's own prompt")  # fmt: skip
    (result,) = run.recorder.messages("tool_result")
    assert not result.is_error, result.text
    # cut at the server's maxTokens (8, about four characters a token)
    assert result.text == "the client's model (faux:test) said: Steam rises, leaves unfurl, and "
    sampled = run.provider.requests[1]
    assert sampled.system_prompt == "You are terse." and sampled.tools == ()
    assert [m.text for m in sampled.messages] == ["One line about tea."]
    assert all(isinstance(m, UserMessage) for m in sampled.messages)
    (asked,) = approver.requests
    assert asked.question is not None and "One line about tea." in asked.question.message


async def test_off_by_default_the_model_is_never_asked() -> None:
    run = await run_agent([*muse(), faux.text("done")], settings_for(0))
    (result,) = run.recorder.messages("tool_result")
    assert result.is_error
    assert len(run.provider.requests) == 2  # the call and the final reply, no sampling


async def test_a_request_the_person_refuses_never_reaches_the_model() -> None:
    run = await run_agent([*muse(), faux.text("done")], settings_for(2), plugins=[deny_all()])
    (result,) = run.recorder.messages("tool_result")
    assert result.is_error and "sampling refused: not allowed" in result.text, result.text
    assert len(run.provider.requests) == 2


async def test_the_budget_bounds_the_requests_of_an_agent() -> None:
    approver = scripted_approver(YES, YES)
    steps = [muse()[0], faux.text("first line"), muse()[0], faux.text("done")]
    run = await run_agent(steps, settings_for(1), plugins=[approver])
    first, second = run.recorder.messages("tool_result")
    assert first.text.endswith("said: first line")
    assert second.is_error and "budget of 1 request(s) is spent" in second.text, second.text
    assert len(approver.requests) == 1


async def test_a_server_already_running_without_sampling_is_not_shared_with_a_budget() -> None:
    # an agent without a budget holds the server open; the one with a budget must still
    # get a connection that declared sampling (the declaration is made when it starts)
    holder = Agent(
        model="faux:test", provider=FauxProvider([faux.text("idle")]), autoload=False,
        settings=settings_for(0),
    )  # fmt: skip
    async with holder:
        await holder.prompt("start the server")
        approver = scripted_approver(YES)
        steps = [*muse(), faux.text("Steam rises"), faux.text("done")]
        run = await run_agent(steps, settings_for(2), plugins=[approver])
    (result,) = run.recorder.messages("tool_result")
    assert not result.is_error, result.text
    assert "the client's model (faux:test) said: Steam rises" in result.text
