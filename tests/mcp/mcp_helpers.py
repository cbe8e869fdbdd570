"""Helpers for the MCP tests (loaded by ``conftest.py`` as ``mcp_helpers``).

The test server's settings and agents that use it.

Agents are built with ``autoload=False`` (nothing installed takes part) and a
``FauxProvider``; every run's events are checked with ``check_event_grammar``. Agents
built from identical server settings share one server process, so most tests reuse the
one a module-wide holder keeps running.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mainspring import Agent, Settings
from mainspring.settings import McpServerSettings, McpSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar

SERVER = str(Path(__file__).with_name("server.py"))


def server_settings(*extra: str, **options: Any) -> McpServerSettings:
    """Settings for the test server over stdio, with extra command-line arguments."""
    return McpServerSettings(command=sys.executable, args=(SERVER, *extra), **options)


def settings_with(**servers: McpServerSettings) -> Settings:
    return Settings(mcp=McpSettings(servers=servers))


@dataclass
class McpRun:
    agent: Agent
    recorder: EventRecorder
    provider: FauxProvider


async def run_agent(steps: list[Any], settings: Settings, **options: Any) -> McpRun:
    """One prompt of a fresh agent using ``settings``; the agent is closed afterwards."""
    provider = FauxProvider(steps)
    options.setdefault("autoload", False)
    agent = Agent(model="faux:test", provider=provider, settings=settings, **options)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    async with agent:
        await agent.prompt("go")
    check_event_grammar(recorder.events)
    return McpRun(agent, recorder, provider)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_http_server(port: int, *extra: str, script: str = SERVER) -> subprocess.Popen[str]:
    """The test server (or ``script``) over streamable HTTP on ``port``, once it listens."""
    process = subprocess.Popen(
        [sys.executable, script, "--http", str(port), *extra],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:  # wait for the server to say it listens
        if "Uvicorn running" in line or "Application startup complete" in line:
            break
    stderr = process.stderr

    def drain() -> None:  # never let the server block on a full pipe
        with stderr:
            stderr.read()

    threading.Thread(target=drain, daemon=True).start()
    return process


def stop_process(process: subprocess.Popen[str]) -> None:
    """End the server at once (a graceful stop would wait for open streams)."""
    process.kill()
    process.wait(10)
