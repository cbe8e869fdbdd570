"""The protocol beyond tools: negotiated versions, resources and prompts, the resource
tool, server log messages, roots (honoured by server-filesystem), tools that need tasks.
Elicitations: ``test_mcp_elicitation.py``."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

import pytest
from mcp_helpers import run_agent, server_settings, settings_with

from mainspring import Agent
from mainspring.mcp import report
from mainspring.settings import McpServerSettings
from mainspring.testing import FauxProvider, faux

RAW_SERVER = str(Path(__file__).with_name("raw_server.py"))


async def test_versions_are_negotiated_per_server() -> None:
    settings = settings_with(
        sdk=server_settings("--extras"),
        raw=McpServerSettings(command=sys.executable, args=(RAW_SERVER,)),
    )
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with agent:
        rows = {row["server"]: row for row in report(agent)}
    assert rows["sdk"]["protocol"] == "2026-07-28"  # the SDK's own server: the newest
    assert rows["raw"]["protocol"] == "2025-11-25"  # knows only initialize: its version


async def test_resources_and_prompts_are_listed_and_resources_read_by_a_tool() -> None:
    settings = settings_with(x=server_settings("--extras"))
    run = await run_agent(
        [
            faux.tool_call("x_read_resource", {"uri": "memo://greeting"}),
            faux.tool_call("x_read_resource", {"uri": "memo://nothing"}),
            faux.text("ok"),
        ],
        settings,
    )
    found, missing = run.recorder.messages("tool_result")
    assert found.text == "[resource memo://greeting]\nhello from a resource"
    assert missing.is_error
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with agent:
        (row,) = report(agent)
        assert row["resources"] == ["memo://greeting"]
        assert row["prompts"] == ["summarize", "review"]
        tool = next(t for t in agent.state.tools if t.name == "x_read_resource")
        assert tool.idempotent and agent.tool_owners["x_read_resource"] == "mcp"


async def test_the_resource_tool_can_be_excluded() -> None:
    settings = settings_with(x=server_settings("--extras", exclude=("read_resource",)))
    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    async with agent:
        assert "x_read_resource" not in {tool.name for tool in agent.state.tools}


async def test_server_log_messages_become_records_naming_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mainspring")
    settings = settings_with(x=server_settings("--extras"))
    run = await run_agent([faux.tool_call("log_something", {}), faux.text("ok")], settings)
    assert run.recorder.messages("tool_result")[0].text == "logged"
    (record,) = [r for r in caplog.records if r.getMessage() == "mcp_server_log"]
    assert record.levelno == logging.WARNING
    assert record.server == "x"  # type: ignore[attr-defined]
    assert record.data == "disk \\x1b[31malmost\\x1b[0m full"  # type: ignore[attr-defined]


@pytest.mark.skipif(shutil.which("npx") is None, reason="npx (Node.js) is not installed")
async def test_roots_are_honoured_by_server_filesystem(tmp_path: Path) -> None:
    given, root = tmp_path / "given", tmp_path / "root"
    given.mkdir()
    root.mkdir()
    (root / "inside.txt").write_text("inside")
    server = McpServerSettings(
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", str(given)),
        roots=(str(root),),
        startup_timeout_s=120,
    )
    run = await run_agent(
        [
            faux.tool_call("fs_list_allowed_directories", {}),
            faux.tool_call("fs_read_text_file", {"path": str(root / "inside.txt")}),
            faux.text("ok"),
        ],
        settings_with(fs=server.model_copy(update={"tool_prefix": "fs"})),
    )
    allowed, read = run.recorder.messages("tool_result")
    assert str(root) in allowed.text and str(given) not in allowed.text, allowed.text
    assert read.text == "inside" or json.loads(read.text).get("content") == "inside"
