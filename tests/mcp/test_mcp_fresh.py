"""Fresh state: a server that dies while idle, calls the server dropped, HTTP sessions
that are gone, HTTP refusals, and tool lists re-read on a restart reaching every agent."""

from __future__ import annotations

import asyncio
import http.server
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import (
    free_port,
    run_agent,
    server_settings,
    settings_with,
    start_http_server,
    stop_process,
)

from mainspring import Agent, PluginLoadError
from mainspring.mcp import McpTool, report, runtime
from mainspring.settings import McpServerSettings
from mainspring.testing import FauxProvider, faux


def connection_of(agent: Agent, server: str) -> Any:
    (tool, *_) = [t for t in agent.state.tools if isinstance(t, McpTool) and t.server == server]
    return tool.connection


async def test_a_server_killed_while_idle_is_marked_and_restarted_by_the_next_call(
    tmp_path: Path,
) -> None:
    settings = settings_with(t=server_settings("--touch", str(tmp_path / "idle")))
    steps = [faux.tool_call("pid", {}), faux.text("one"), faux.tool_call("pid", {}), faux.text("")]
    agent = Agent(
        model="faux:test", provider=FauxProvider(steps), settings=settings, autoload=False
    )
    async with agent:
        await agent.prompt("first")
        first = int(agent.state.messages[-2].text)
        os.kill(first, signal.SIGKILL)
        connection = connection_of(agent, "t")
        assert await runtime.call(connection.wait_for_state("failed")) == "failed"
        (row,) = report(agent)
        assert row["state"] == "failed" and "exited while idle" in str(row["error"])
        await agent.prompt("second")
        result = agent.state.messages[-2]
        assert not result.is_error and int(result.text) != first
        assert connection.state == "running"


async def test_a_call_the_server_dropped_is_sent_again_only_when_idempotent(
    tmp_path: Path,
) -> None:
    settings = settings_with(t=server_settings("--touch", str(tmp_path / "drop")))
    run = await run_agent(
        [
            faux.tool_call("crash_once", {"flag": str(tmp_path / "a")}),
            faux.tool_call("crash_once_unsafe", {"flag": str(tmp_path / "b")}),
            faux.text("ok"),
        ],
        settings,
    )
    retried, refused = run.recorder.messages("tool_result")
    assert retried.text == "answered after a restart" and not retried.is_error
    assert refused.is_error and "exited" in refused.text
    assert "crash_once: exiting the first time" in refused.text


async def test_a_restarted_http_server_is_reached_again_by_a_read_only_call() -> None:
    # whether the old connection was kept alive (sent again) or a session was lost (404,
    # a new session), the call reaches the new process
    port = free_port()
    server = start_http_server(port)
    settings = settings_with(h=McpServerSettings(url=f"http://127.0.0.1:{port}/mcp"))
    steps = [faux.tool_call("now", {}), faux.text(""), faux.tool_call("now", {}), faux.text("")]
    agent = Agent(
        model="faux:test", provider=FauxProvider(steps), settings=settings, autoload=False
    )
    try:
        async with agent:
            await agent.prompt("one")
            before = float(agent.state.messages[-2].text)
            stop_process(server)
            server = start_http_server(port)
            await agent.prompt("two")
            result = agent.state.messages[-2]
            assert not result.is_error and float(result.text) > before
    finally:
        stop_process(server)


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_http_401_names_the_server_and_the_header(
    refusing_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_TEST_TOKEN", "wrong")
    server = McpServerSettings(
        url=refusing_server,
        headers={"Authorization": "Bearer ${MAINSPRING_TEST_TOKEN}"},
        required=True,
    )
    with pytest.raises(PluginLoadError) as caught:
        Agent(
            model="faux:test",
            provider=FauxProvider([]),
            settings=settings_with(auth=server),
            autoload=False,
        )
    assert (
        'MCP server "auth" was refused by the server: HTTP 401 Unauthorized '
        "(the header Authorization was sent" in str(caught.value)
    )


async def test_a_tool_list_reread_on_a_restart_reaches_every_agent(tmp_path: Path) -> None:
    flag = tmp_path / "extra"
    settings = settings_with(t=server_settings("--extra-tool-if", str(flag)))
    steps = [faux.tool_call("pid", {}), faux.text("")]
    first = Agent(
        model="faux:test", provider=FauxProvider(steps), settings=settings, autoload=False
    )
    second = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with first, second:
        assert "extra" not in {tool.name for tool in second.state.tools}
        connection = connection_of(first, "t")
        pid = await runtime.call(connection.call_tool("pid", {}, None))
        flag.touch()
        os.kill(int(pid.content[0].text), signal.SIGKILL)
        await runtime.call(connection.wait_for_state("failed"))
        await first.prompt("restart it")  # the call starts the server again
        for agent in (first, second):
            assert "extra" in {tool.name for tool in agent.state.tools}
            assert agent.tool_owners["extra"] == "mcp"


async def test_a_restarted_http_server_is_listened_to_again_without_a_call(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "extra"
    port = free_port()
    server = start_http_server(port)
    url = f"http://127.0.0.1:{port}/mcp"
    settings = settings_with(h=McpServerSettings(url=url))
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    # another client of the same server (another header: another session)
    other = settings_with(o=McpServerSettings(url=url, headers={"X-Client": "other"}))
    steps = [faux.tool_call("grow", {}), faux.text("")]
    grower = Agent(model="faux:test", provider=FauxProvider(steps), settings=other, autoload=False)
    loop = asyncio.get_running_loop()
    changed: asyncio.Queue[None] = asyncio.Queue()

    def listener() -> None:  # called on the MCP runtime's thread, beside the agent's own
        loop.call_soon_threadsafe(changed.put_nowait, None)

    async def told() -> None:
        await changed.get()
        # the listeners are called in one go on the runtime loop: once it runs the next
        # coroutine, the agent's own listener has swapped its tools too
        await runtime.call(asyncio.sleep(0))

    try:
        async with agent, grower:
            connection = connection_of(agent, "h")
            connection.listeners.add(listener)
            assert "extra" not in {tool.name for tool in agent.state.tools}
            flag.touch()
            stop_process(server)
            server = start_http_server(port, "--extra-tool-if", str(flag))
            await told()  # a new session, its tools listed: no call was needed
            assert "extra" in {tool.name for tool in agent.state.tools}
            assert connection.state == "running"
            await grower.prompt("grow")  # the new server tells its listeners
            await told()
            assert "added" in {tool.name for tool in agent.state.tools}
            connection.listeners.discard(listener)
    finally:
        stop_process(server)
