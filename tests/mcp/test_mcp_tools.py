"""MCP tools through full agent runs: results, errors, progress, validation, names."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_helpers import McpRun, run_agent, server_settings, settings_with

from mainspring import Agent, PluginLoadError, Settings, hookimpl, tool
from mainspring.events import ToolExecutionEnd, ToolExecutionUpdate
from mainspring.mcp import McpTool
from mainspring.messages import ImageContent, TextContent
from mainspring.testing import FauxProvider, faux


def only_result(run: McpRun) -> Any:
    (result,) = run.recorder.messages("tool_result")
    return result


async def test_tools_are_listed_with_the_servers_schema(shared_server: Settings) -> None:
    agent = Agent(
        model="faux:test", provider=FauxProvider([]), settings=shared_server, autoload=False
    )
    async with agent:
        tools = {t.name: t for t in agent.state.tools}
        assert {"echo", "everything", "slow", "crash", "progress"} <= set(tools)
        echo = tools["echo"]
        assert isinstance(echo, McpTool) and echo.server == "t"
        assert echo.description == "Repeat text."
        assert echo.spec.parameters["properties"]["text"]["type"] == "string"
        assert agent.tool_owners["echo"] == "mcp"


async def test_text_result(shared_server: Settings) -> None:
    run = await run_agent(
        [faux.tool_call("echo", {"text": "hi", "times": 2}), faux.text("ok")], shared_server
    )
    result = only_result(run)
    assert result.is_error is False and result.text == "hi hi"
    assert result.details["server"] == "t" and result.details["tool"] == "echo"


async def test_every_content_type(shared_server: Settings) -> None:
    run = await run_agent([faux.tool_call("everything", {}), faux.text("ok")], shared_server)
    result = only_result(run)
    kinds = [type(block).__name__ for block in result.content]
    assert kinds == [
        "TextContent",
        "ImageContent",
        "TextContent",
        "TextContent",
        "ImageContent",
        "TextContent",
        "TextContent",
    ]
    texts = [b.text for b in result.content if isinstance(b, TextContent)]
    assert texts[0] == "plain text"
    assert texts[1] == "[audio: audio/wav, 8 bytes]"
    assert texts[2] == "[resource file:///notes.txt]\nembedded text"
    assert texts[3] == "[resource file:///data.bin: application/octet-stream, 4 bytes]"
    assert texts[4] == "[resource: readme <file:///README.md>]"
    images = [b for b in result.content if isinstance(b, ImageContent)]
    assert [image.mime_type for image in images] == ["image/png", "image/png"]
    assert result.details["structured_content"] == {"count": 7, "ok": True}
    uris = [item.get("uri") for item in result.details["resources"]]
    assert "file:///notes.txt" in uris and "file:///README.md" in uris
    # the model was sent the same blocks
    sent = run.provider.requests[1].messages[-1]
    assert [type(b).__name__ for b in sent.content] == kinds


async def test_structured_only_result_is_shown_as_json(shared_server: Settings) -> None:
    run = await run_agent([faux.tool_call("structured_only", {}), faux.text("ok")], shared_server)
    result = only_result(run)
    assert result.text == '{"answer": 42}'
    assert result.details["structured_content"] == {"answer": 42}


async def test_is_error_becomes_an_error_result(shared_server: Settings) -> None:
    run = await run_agent(
        [faux.tool_call("fails", {"reason": "disk full"}), faux.text("ok")], shared_server
    )
    result = only_result(run)
    assert result.is_error is True and result.text == "failed: disk full"
    (end,) = run.recorder.of_type(ToolExecutionEnd)
    assert end.is_error is True


async def test_arguments_are_validated_against_the_servers_schema(
    shared_server: Settings,
) -> None:
    run = await run_agent(
        [faux.tool_call("echo", {"text": 5, "extra": 1}), faux.text("ok")], shared_server
    )
    result = only_result(run)
    assert result.is_error is True
    assert 'Invalid arguments for tool "echo"' in result.text
    assert "text: expected string, got integer (5)" in result.text
    # no gate decision: validation comes before the gates
    assert not run.recorder.of_type("tool_decision")


async def test_progress_becomes_tool_execution_updates(shared_server: Settings) -> None:
    run = await run_agent(
        [faux.tool_call("progress", {"steps": 3}), faux.text("ok")], shared_server
    )
    updates = run.recorder.of_type(ToolExecutionUpdate)
    texts = [u.partial_result.text for u in updates]
    # at most one update per 50 ms: the first at once, the last before the result
    assert texts[0] == "step 1 of 3" and texts[-1] == "step 3 of 3" and len(texts) <= 3
    assert updates[-1].partial_result.details == {
        "progress": 3.0,
        "total": 3.0,
        "message": "step 3 of 3",
    }
    assert only_result(run).text == "done after 3 steps"


async def test_prefix_include_exclude() -> None:
    settings = settings_with(
        t=server_settings(tool_prefix="srv", include=("echo", "pid", "now"), exclude=("now",))
    )
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with agent:
        assert sorted(t.name for t in agent.state.tools) == ["srv_echo", "srv_pid"]
        run = await run_agent(
            [faux.tool_call("srv_echo", {"text": "x"}), faux.text("ok")], settings
        )
        assert only_result(run).text == "x"


async def test_a_name_collision_is_a_load_error(shared_server: Settings) -> None:
    @tool
    def echo(text: str) -> str:
        """A native echo."""
        return text

    with pytest.raises(PluginLoadError, match='two tools are named "echo"'):
        Agent(
            model="faux:test",
            provider=FauxProvider([]),
            settings=shared_server,
            tools=[echo],
            autoload=False,
        )

    class Native:
        name = "native"

        @hookimpl
        def register_tools(self) -> list[Any]:
            return [echo]

    with pytest.raises(PluginLoadError) as raised:
        Agent(
            model="faux:test",
            provider=FauxProvider([]),
            settings=shared_server,
            plugins=[Native()],
            autoload=False,
        )
    # both owners, the server, and the setting that separates them
    message = str(raised.value)
    assert "'native'" in message and "'mcp'" in message, message
    assert 'the MCP server "t" gives it (its tool "echo")' in message
    assert 'set tool_prefix on that server (tool_prefix = "t" names it t_echo)' in message
    assert "disable_plugins" not in message


async def test_a_plugin_can_declare_a_server() -> None:
    server = server_settings()

    class Bundle:
        name = "bundle"

        @staticmethod
        def mcp_servers() -> dict[str, Any]:
            return {"bundled": {"command": server.command, "args": server.args, "tool_prefix": "b"}}

    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.tool_call("b_echo", {"text": "y"}), faux.text("ok")]),
        plugins=[Bundle()],
        autoload=False,
    )
    async with agent:
        await agent.prompt("go")
        assert agent.state.messages[-2].text == "y"
        assert agent.tool_owners["b_echo"] == "mcp"


async def test_a_disabled_server_is_ignored() -> None:
    settings = settings_with(t=server_settings(enabled=False))
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    assert agent.state.tools == ()
