"""One server, one tool at a time: optional and required servers that cannot start, tools
that cannot be used, two servers offering one name, parallel starts, commands on PATH."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp_helpers import SERVER, run_agent, server_settings, settings_with

from mainspring import Agent, PluginLoadError
from mainspring.cli import main
from mainspring.mcp import report
from mainspring.settings import McpServerSettings, load_settings
from mainspring.testing import FauxProvider, faux

RAW_SERVER = str(Path(__file__).with_name("raw_server.py"))
MISSING = "no-such-mcp-server-command"


def rows_of(agent: Agent) -> dict[str, dict[str, object]]:
    return {str(row["server"]): row for row in report(agent)}


async def test_an_optional_server_that_cannot_start_is_reported_and_the_others_serve() -> None:
    settings = settings_with(t=server_settings(), gone=McpServerSettings(command=MISSING))
    provider = FauxProvider([faux.tool_call("echo", {"text": "still here"}), faux.text("ok")])
    agent = Agent(model="faux:test", provider=provider, settings=settings, autoload=False)
    async with agent:
        rows = rows_of(agent)
        assert rows["gone"]["state"] == "failed" and rows["gone"]["tools"] == []
        assert f'command "{MISSING}" is not on its PATH' in str(rows["gone"]["error"])
        assert "echo" in rows["t"]["tools"]  # type: ignore[operator]
        await agent.prompt("go")
    (result,) = [m for m in agent.state.messages if m.role == "tool_result"]
    assert result.text == "still here" and not result.is_error


async def test_a_required_server_that_cannot_start_stops_the_agent() -> None:
    settings = settings_with(
        t=server_settings(), gone=McpServerSettings(command=MISSING, required=True)
    )
    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    message = str(caught.value)
    assert f'MCP server "gone" cannot start: command "{MISSING}"' in message
    assert "required" in message


async def test_a_relative_command_resolves_against_the_servers_directory(tmp_path: Path) -> None:
    script = tmp_path / "serve"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {SERVER}\n")
    script.chmod(0o755)
    settings = settings_with(
        local=McpServerSettings(command="./serve", cwd=str(tmp_path), required=True),
        path=McpServerSettings(
            command="serve", env={"PATH": str(tmp_path)}, tool_prefix="p", required=True
        ),
    )
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with agent:
        rows = rows_of(agent)
        assert "echo" in rows["local"]["tools"]  # type: ignore[operator]
        assert "p_echo" in rows["path"]["tools"]  # type: ignore[operator]


async def test_a_bad_tool_is_left_out_and_the_servers_other_tools_stay() -> None:
    settings = settings_with(raw=McpServerSettings(command=sys.executable, args=(RAW_SERVER,)))
    run = await run_agent([faux.tool_call("fine", {"x": "y"}), faux.text("ok")], settings)
    (result,) = run.recorder.messages("tool_result")
    assert json.loads(result.text) == {"x": "y"}
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with agent:
        row = rows_of(agent)["raw"]
        assert row["tools"] == ["fine"]
        left_out = row["left_out"]
        assert isinstance(left_out, dict)
        assert left_out["untyped"] == 'its inputSchema has no "type": "object" at the root'
        assert "RE2 cannot compile the pattern" in left_out["backref"]
        assert left_out["not_a_schema"] == "its inputSchema is not a JSON object"
        assert (
            left_out["task_only"] == "it can only run as a task, which this client does not offer"
        )


async def test_two_servers_offering_one_tool_name_name_each_other() -> None:
    settings = settings_with(first=server_settings(), second=server_settings("--log", os.devnull))
    provider = FauxProvider([faux.tool_call("echo", {"text": "one"}), faux.text("ok")])
    agent = Agent(model="faux:test", provider=provider, settings=settings, autoload=False)
    async with agent:
        rows = rows_of(agent)
        assert "echo" in rows["first"]["tools"]  # type: ignore[operator]
        assert "echo" not in rows["second"]["tools"]  # type: ignore[operator]
        reason = rows["second"]["left_out"]["echo"]  # type: ignore[index]
        assert 'MCP server "first" has a tool named "echo" too' in reason
        assert 'tool_prefix = "second"' in reason
        assert agent.tool_owners["echo"] == "mcp"
        await agent.prompt("go")
    (result,) = [m for m in agent.state.messages if m.role == "tool_result"]
    assert result.text == "one"


async def test_servers_start_at_the_same_time(tmp_path: Path) -> None:
    # each server answers only once the other has started: one after the other never ends
    a, b = tmp_path / "a", tmp_path / "b"
    settings = settings_with(
        a=server_settings("--touch", str(a), "--wait-for", str(b), required=True),
        b=server_settings("--touch", str(b), "--wait-for", str(a), tool_prefix="b", required=True),
    )
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with agent:
        assert {row["state"] for row in report(agent)} == {"running"}


def test_mcp_lists_a_failed_optional_server_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "[mcp.servers.ok]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(SERVER)}]\n"
        'include = ["echo"]\n'
        "timeout_s = false\n"
        "[mcp.servers.gone]\n"
        f'command = "{MISSING}"\n'
    )
    monkeypatch.setenv("MAINSPRING_CONFIG", str(config))
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert load_settings().mcp.servers["ok"].timeout_s is None
    assert main(["mcp", "--json"]) == 0
    rows = {row["server"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["ok"]["tools"] == ["echo"] and rows["ok"]["state"] in ("running", "stopped")
    assert rows["gone"]["state"] == "failed" and MISSING in rows["gone"]["error"]
    assert main(["mcp"]) == 0
    text = capsys.readouterr().out
    assert "gone  (stdio: " in text and 'error: MCP server "gone" cannot start' in text
