"""MCP prompts: listed and fetched as messages by embedding code, and sent from ``chat``
with ``/prompt NAME ARG=VALUE...``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_helpers import SERVER, server_settings, settings_with

from cli_in_process import run_cli
from mainspring import Agent, AssistantMessage, UserMessage
from mainspring.mcp import McpPrompt, PromptArgument, get_prompt, prompts
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

SETTINGS = settings_with(x=server_settings("--extras"))


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    import asyncio

    held = Agent(model="faux:test", provider=FauxProvider([]), settings=SETTINGS, autoload=False)
    yield held
    asyncio.run(held.aclose())


def test_prompts_are_listed_with_their_arguments(agent: Agent) -> None:
    found = {prompt.name: prompt for prompt in prompts(agent)}
    assert found["summarize"] == McpPrompt(
        "x", "summarize", "Ask for a summary.", (PromptArgument("text", None, True),)
    )
    assert [(a.name, a.required) for a in found["review"].arguments] == [
        ("code", True),
        ("focus", False),
    ]
    assert found["review"].qualified == "x:review"


async def test_a_prompt_is_fetched_as_messages_the_agent_is_sent() -> None:
    provider = FauxProvider([faux.text("a fine review")])
    agent = Agent(model="faux:test", provider=provider, settings=SETTINGS, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    async with agent:
        messages = await get_prompt(agent, "x:review", {"code": "print(1)"})
        assert [type(m) for m in messages] == [UserMessage, AssistantMessage, UserMessage]
        assert messages[0].text == "Review this for bugs:\nprint(1)"
        assert messages[2].text == "Python.\\x1b[2J"  # escaped, as tool results are
        await agent.prompt(messages)
    check_event_grammar(recorder.events)
    (request,) = provider.requests
    sent = [getattr(m, "text", None) for m in request.messages]
    assert sent == ["Review this for bugs:\nprint(1)", "Which language is it?", "Python.\\x1b[2J"]


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("nothing", {}, "no MCP prompt 'nothing' (the servers' prompts: x:summarize, x:review)"),
        ("summarize", {}, "prompt x:summarize needs text"),
        ("summarize", {"text": "a", "tone": "b"}, "prompt x:summarize takes text, not tone"),
        ("y:summarize", {}, "no MCP prompt 'y:summarize'"),
    ],
)
async def test_a_prompt_that_cannot_be_fetched_says_why(
    agent: Agent, name: str, arguments: dict[str, str], problem: str
) -> None:
    with pytest.raises(ValueError) as raised:
        await get_prompt(agent, name, arguments)
    assert str(raised.value).startswith(problem)


ECHO = """
from mainspring import hookimpl
from mainspring.testing import FauxProvider, faux


def _echo(request):
    return faux.text("heard: " + " | ".join(m.text for m in request.messages[-3:]))


@hookimpl
def register_providers():
    return [FauxProvider([_echo] * 5, name="echo")]
"""


def test_chat_sends_a_prompt_with_slash_prompt(tmp_path: Path) -> None:
    (tmp_path / "echo_plugin.py").write_text(ECHO)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    env.pop("MAINSPRING_CONFIG", None)
    server = f"x={{command={json.dumps(sys.executable)}, args=[{json.dumps(SERVER)}, '--extras']}}"
    typed = "\n".join(
        [
            "/prompt",
            "/prompt nothing",
            "/prompt summarize",
            "/prompt summarize oops",
            '/prompt summarize text="two words"',
        ]
    )
    done = run_cli(
        ["chat", "--plugin", "echo_plugin", "--model", "echo:x", "--mcp", server, "--no-session"],
        env,
        stdin=typed + "\n",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "heard: Summarize: two words"
    err = done.stderr
    assert "x:summarize text*=…  — Ask for a summary." in err
    assert "x:review code*=… focus=…  — A review, ⟨U+001B⟩[31mred⟨U+001B⟩[0m" in err
    assert "mainspring: error: no MCP prompt 'nothing'" in err
    assert "mainspring: error: prompt x:summarize needs text" in err
    assert "mainspring: error: /prompt takes ARG=VALUE after the name, got 'oops'" in err


async def test_a_changed_prompt_list_is_known_before_the_result_of_the_call() -> None:
    steps = [faux.tool_call("learn", {}), faux.text("ok")]
    provider = FauxProvider(steps)
    # a server of its own: the prompt it learns stays learnt
    settings = settings_with(x=server_settings("--extras", "--log", os.devnull))
    agent = Agent(model="faux:test", provider=provider, settings=settings, autoload=False)
    async with agent:
        assert "learned" not in {prompt.name for prompt in prompts(agent)}
        await agent.prompt("learn")
        assert "learned" in {prompt.name for prompt in prompts(agent)}
        assert (await get_prompt(agent, "learned"))[0].text == "learned"
