"""Helpers for the MCP tests (loaded by ``conftest.py`` as ``mcp_helpers``).

The test server's settings and agents that use it.

Agents are built with ``autoload=False`` (nothing installed takes part) and a
``FauxProvider``; every run's events are checked with ``check_event_grammar``. Agents
built from identical server settings share one server process, so most tests reuse the
one a module-wide holder keeps running.
"""

from __future__ import annotations

import sys
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
