"""Slow MCP checks, run by ``.ci/run`` (``MAINSPRING_SLOW_TESTS=1``), skipped otherwise:
real servers from PyPI run offline through full agent runs with the policy pack, and the
leak check (100 agents each using a server leave no child process and no open pipe)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import mainspring_policy_pack
import pytest
from mcp_helpers import run_agent, server_settings, settings_with

from mainspring import Agent, Settings
from mainspring.settings import McpServerSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

pytestmark = pytest.mark.skipif(
    os.environ.get("MAINSPRING_SLOW_TESTS") != "1",
    reason="slow MCP tests run with MAINSPRING_SLOW_TESTS=1 (.ci/run does)",
)

PACK = "mainspring-policy-pack"


def pack_settings(workspace: Path, **servers: McpServerSettings) -> Settings:
    settings = settings_with(**servers)
    return settings.model_copy(update={"plugin_options": {PACK: {"workspace": str(workspace)}}})


async def test_mcp_server_time(tmp_path: Path) -> None:
    time_server = McpServerSettings(
        command=sys.executable,
        args=("-m", "mcp_server_time", "--local-timezone", "UTC"),
        tool_prefix="time",
    )
    run = await run_agent(
        [
            faux.tool_call("time_get_current_time", {"timezone": "Europe/Paris"}),
            faux.tool_call(
                "time_convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            ),
            faux.tool_call("time_get_current_time", {"timezone": 5}),
            faux.text("done"),
        ],
        pack_settings(tmp_path, time=time_server),
        plugins=[mainspring_policy_pack],
    )
    now, converted, invalid = run.recorder.messages("tool_result")
    assert now.is_error is False and "Europe/Paris" in now.text
    assert converted.is_error is False and "21:00" in converted.text
    assert invalid.is_error and "timezone: expected string, got integer (5)" in invalid.text


def _make_repo(repo: Path) -> None:
    """A repository with one commit and an unstaged change to ``a.txt``."""
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first commit"], check=True)
    (repo / "a.txt").write_text("two\n")


async def test_mcp_server_git(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    await asyncio.to_thread(_make_repo, repo)
    git_server = McpServerSettings(
        command=sys.executable, args=("-m", "mcp_server_git", "--repository", str(repo))
    )
    run = await run_agent(
        [
            faux.tool_call("git_status", {"repo_path": str(repo)}),
            faux.tool_call("git_diff_unstaged", {"repo_path": str(repo)}),
            faux.tool_call("git_log", {"repo_path": str(repo), "max_count": 5}),
            faux.text("done"),
        ],
        pack_settings(repo, git=git_server),
        plugins=[mainspring_policy_pack],
    )
    status, diff, log = run.recorder.messages("tool_result")
    assert status.is_error is False and "a.txt" in status.text
    assert "-one" in diff.text and "+two" in diff.text
    assert "first commit" in log.text
    assert [d.decision for d in run.recorder.of_type("tool_decision")] == ["allow"] * 3


def _children() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                found.append(int(entry))
    return found


def _pipes() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
        except OSError:
            continue
    return count


async def test_no_process_or_pipe_is_left_after_100_agents() -> None:
    settings = settings_with(t=server_settings("--log", os.devnull, tool_prefix="leak"))
    children, pipes = len(_children()), _pipes()
    used = set()

    async def one(index: int) -> None:
        provider = FauxProvider([faux.tool_call("leak_pid", {}), faux.text(str(index))])
        agent = Agent(model="faux:test", provider=provider, settings=settings, autoload=False)
        recorder = EventRecorder()
        agent.subscribe(recorder)
        async with agent:
            await agent.prompt("go")
        check_event_grammar(recorder.events)
        (result,) = recorder.messages("tool_result")
        assert result.is_error is False, result.text
        used.add(int(result.text))

    for wave in range(10):  # ten agents at a time share a server; each wave starts one
        agents = [
            asyncio.to_thread(lambda i=i: asyncio.run(one(i)))
            for i in range(wave * 10, wave * 10 + 10)
        ]
        await asyncio.gather(*agents)
    assert len(used) >= 10
    assert len(_children()) == children, _children()
    assert _pipes() == pipes
    print(
        f"\nleak check: {len(used)} server processes for 100 agents; "
        f"children {children} -> {len(_children())}, pipes {pipes} -> {_pipes()}"
    )
