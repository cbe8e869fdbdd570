"""The CLI as an approver: it asks on a terminal (y / n / a), answers by --yes / --no, and
refuses without a terminal, saying so on stderr every time."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cli_in_process import run_cli

if TYPE_CHECKING:
    from conftest import Terminal

ASKING_PLUGIN = '''
from mainspring import Ask, hookimpl, tool
from mainspring.testing import FauxProvider, faux

name = "asking"

@tool
def push(branch: str) -> str:
    """Push a branch."""
    return f"pushed {branch}"

@hookimpl
def register_providers():
    script = [
        faux.tool_call("push", {"branch": "main"}),
        faux.tool_call("push", {"branch": "dev"}),
        faux.text("all done"),
    ]
    return [FauxProvider(script, name="scripted")]

@hookimpl
def register_tools(agent):
    return [push]

@hookimpl
def before_tool_call(call):
    return Ask("pushing publishes the branch")
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "asking_plugin.py").write_text(ASKING_PLUGIN)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


ARGS = ["-m", "mainspring", "run", "push it", "--plugin", "asking_plugin", "--model", "scripted:x"]


def run_piped(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli([*ARGS[2:], *extra], env)


def test_without_a_terminal_asked_calls_are_refused_and_it_says_so(env: dict[str, str]) -> None:
    done = run_piped(env)

    assert done.returncode == 0, done.stderr
    assert (
        'approval: push {"branch": "main"} (pushing publishes the branch): refused' in done.stderr
    )
    assert "pushed" not in done.stdout
    assert "all done" in done.stdout


def test_yes_allows_every_asked_call_and_says_so(env: dict[str, str]) -> None:
    done = run_piped(env, "--yes")

    assert done.returncode == 0, done.stderr
    assert done.stderr.count("allowed (--yes)") == 2
    assert "all done" in done.stdout


def test_no_and_yes_together_are_a_usage_error(env: dict[str, str]) -> None:
    done = run_piped(env, "--yes", "--no")

    assert done.returncode == 2


@pytest.fixture
def terminal(env: dict[str, str], pty_terminal: type[Terminal]) -> Iterator[Terminal]:
    session = pty_terminal([sys.executable, *ARGS], env)
    yield session
    if session.process.poll() is None:
        session.process.kill()
        session.process.wait(timeout=15)
    os.close(session.master)


def test_on_a_terminal_it_asks_and_t_remembers_the_tool(terminal: Terminal) -> None:
    terminal.expect('approve push {"branch": "main"}?')
    terminal.expect("pushing publishes the branch")
    terminal.type("t\n")
    # the second call of the same tool is allowed without asking again
    terminal.expect("all done")
    assert terminal.close() == 0
    assert terminal.screen.count("approve push") == 1


def test_on_a_terminal_n_refuses(terminal: Terminal) -> None:
    terminal.expect("approve push")
    terminal.type("n\n")
    terminal.expect('approve push {"branch": "dev"}?')
    terminal.type("maybe\n")
    terminal.expect("please answer y, n, a or t")
    terminal.type("y\n")
    terminal.expect("all done")
    assert terminal.close() == 0


def test_a_resumed_session_shows_and_keeps_its_remembered_approvals(
    env: dict[str, str], tmp_path: Path, pty_terminal: type[Terminal]
) -> None:
    session = str(tmp_path / "session.jsonl")
    first = pty_terminal([sys.executable, *ARGS, "--session", session], env)
    try:
        first.expect("approve push")
        first.type("t\n")
        first.expect("all done")
        assert first.close() == 0
    finally:
        os.close(first.master)

    done = run_piped(env, "--session", session)

    assert "mainspring: remembered approvals: push (every call)" in done.stderr
    assert "refused" not in done.stderr


def test_on_a_terminal_a_remembers_only_the_exact_call(terminal: Terminal) -> None:
    terminal.expect('approve push {"branch": "main"}?')
    terminal.type("a\n")
    # another branch is another call: asked again
    terminal.expect('approve push {"branch": "dev"}?')
    terminal.type("n\n")
    terminal.expect("all done")
    assert terminal.close() == 0
