"""MCP server lifecycle: abort and timeouts, crashes and restarts, start failures,
sharing, closing, tool-list changes, and the streamable-HTTP transport."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import SERVER, run_agent, server_settings, settings_with

from mainspring import Agent, PluginLoadError
from mainspring.events import AgentEnd, ToolExecutionUpdate
from mainspring.mcp import status
from mainspring.settings import McpServerSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


def only_result(run: Any) -> Any:
    (result,) = run.recorder.messages("tool_result")
    return result


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_abort_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    settings = settings_with(t=server_settings("--log", str(log)))
    provider = FauxProvider([faux.tool_call("slow", {"seconds": 60}), faux.text("never")])
    agent = Agent(model="faux:test", provider=provider, settings=settings, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    def abort_when_started(event: Any, signal: Any) -> None:
        if isinstance(event, ToolExecutionUpdate):  # the server is running the tool
            agent.abort()

    agent.subscribe(abort_when_started)
    async with agent:
        await agent.prompt("go")
        check_event_grammar(recorder.events)
        (result,) = recorder.messages("tool_result")
        assert result.is_error and "abort" in result.text.lower()
        assert recorder.of_type(AgentEnd)[0].reason == "aborted"
        # the server got notifications/cancelled: a later call on the same session is
        # answered after it was handled
        agent_provider = FauxProvider([faux.tool_call("echo", {"text": "after"}), faux.text("")])
        other = Agent(model="faux:test", provider=agent_provider, settings=settings, autoload=False)
        async with other:
            await other.prompt("go")
    assert "cancelled slow" in log.read_text()


async def test_a_timeout_gives_an_error_result() -> None:
    settings = settings_with(t=server_settings(timeout_s=0.2))
    run = await run_agent([faux.tool_call("slow", {"seconds": 60}), faux.text("ok")], settings)
    result = only_result(run)
    assert result.is_error and "0.2" in result.text
    assert run.recorder.of_type(AgentEnd)[0].reason == "stop"


async def test_a_server_that_exits_mid_call_then_restarts() -> None:
    settings = settings_with(t=server_settings("--log", os.devnull))
    run = await run_agent(
        [
            faux.tool_call("crash", {}),
            faux.tool_call("echo", {"text": "back"}),
            faux.text("ok"),
        ],
        settings,
    )
    crashed, restarted = run.recorder.messages("tool_result")
    assert crashed.is_error
    assert 'MCP server "t"' in crashed.text and "during the call" in crashed.text
    assert "crash: exiting with status 3" in crashed.text  # the stderr tail
    assert restarted.is_error is False and restarted.text == "back"


async def test_a_server_that_never_answers_initialize_fails_the_agent() -> None:
    settings = settings_with(
        t=server_settings("--hang-initialize", startup_timeout_s=3, required=True)
    )
    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    message = str(caught.value)
    assert "did not answer initialize within 3.0 s" in message
    assert "initialize will never be answered" in message


async def test_a_known_server_that_stops_starting_fails_each_call(tmp_path: Path) -> None:
    flag = tmp_path / "hang"
    known = settings_with(t=server_settings("--hang-if", str(flag)))
    first = Agent(model="faux:test", provider=FauxProvider([]), settings=known, autoload=False)
    await first.aclose()  # the tool list is known now; the server has stopped
    flag.touch()
    # same transport, so the same (known) tool list; a short start deadline
    settings = settings_with(t=server_settings("--hang-if", str(flag), startup_timeout_s=3))
    run = await run_agent(
        [
            faux.tool_call("echo", {"text": "a"}),
            faux.tool_call("echo", {"text": "b"}),
            faux.tool_call("echo", {"text": "c"}),
            faux.text("ok"),
        ],
        settings,
    )
    one, two, three = run.recorder.messages("tool_result")
    # the first failure is retried by the next call; after the second, calls wait a while
    for result in (one, two):
        assert result.is_error and "did not answer initialize within 3.0 s" in result.text
        assert "initialize will never be answered" in result.text
    assert three.is_error and "next start attempt" in three.text


async def test_agents_share_a_server_and_the_last_close_stops_it() -> None:
    settings = settings_with(t=server_settings("--log", os.devnull, tool_prefix="s"))
    pids = []
    agents = []
    for _ in range(2):
        provider = FauxProvider([faux.tool_call("s_pid", {}), faux.text("")])
        agent = Agent(model="faux:test", provider=provider, settings=settings, autoload=False)
        await agent.prompt("go")
        pids.append(int(agent.state.messages[-2].text))
        agents.append(agent)
    assert pids[0] == pids[1]
    await agents[0].aclose()
    assert not gone(pids[0])
    await agents[1].aclose()
    await agents[1].aclose()  # idempotent
    assert gone(pids[0])


async def test_eager_startup_starts_the_server_with_each_agent() -> None:
    settings = settings_with(t=server_settings("--log", os.devnull, startup="eager"))
    first = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    await first.aclose()
    second = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with second:
        states = [row["state"] for row in status() if row["server"] == "t"]
        assert "running" in states


async def test_a_tool_list_change_reaches_the_next_run() -> None:
    settings = settings_with(t=server_settings("--log", "/dev/null/x"))
    provider = FauxProvider(
        [
            faux.tool_call("grow", {}),
            faux.text("grown"),
            faux.tool_call("added", {}),
            faux.text("done"),
        ]
    )
    agent = Agent(model="faux:test", provider=provider, settings=settings, autoload=False)
    async with agent:
        assert "added" not in {tool.name for tool in agent.state.tools}
        await agent.prompt("grow")
        assert "added" in {tool.name for tool in agent.state.tools}
        assert agent.tool_owners["added"] == agent.tool_owners["grow"] == "mcp"
        await agent.prompt("use it")
        assert agent.state.messages[-2].text == "new"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:  # wait for the server to say it listens
        if "Uvicorn running" in line or "Application startup complete" in line:
            break
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        process.stderr.close()


async def test_streamable_http(http_server: str) -> None:
    settings = settings_with(h=McpServerSettings(url=http_server, tool_prefix="h"))
    run = await run_agent(
        [
            faux.tool_call("h_echo", {"text": "over http"}),
            faux.tool_call("h_progress", {"steps": 2}),
            faux.tool_call("h_fails", {"reason": "no"}),
            faux.text("ok"),
        ],
        settings,
    )
    echo, progress, fails = run.recorder.messages("tool_result")
    assert echo.text == "over http"
    assert progress.text == "done after 2 steps"
    updates = [u.partial_result.text for u in run.recorder.of_type("tool_execution_update")]
    assert updates == ["step 1 of 2", "step 2 of 2"]
    assert fails.is_error and fails.text == "failed: no"
