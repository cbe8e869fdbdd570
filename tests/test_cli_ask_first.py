"""The command line's default for the coding tools: ``bash`` and ``write`` ask first.

Contract (``mainspring.cli.default_gate``, README): when no approver is configured, a call
of ``bash`` or ``write`` from ``mainspring-coding-tools`` asks at a terminal and, without
one, is refused before it runs; ``--yes`` allows it; a configured approver (a plugin with
``request_approval``) decides alone; another plugin's tool of the same name is not caught.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cli_in_process import run_cli

if TYPE_CHECKING:
    from conftest import Terminal

pytest.importorskip("mainspring_coding_tools")

SCRIPTED = """
from mainspring import Approval, hookimpl, tool
from mainspring.testing import FauxProvider, faux

name = "scripted"


@hookimpl
def register_providers():
    return [
        FauxProvider(
            [faux.tool_call("bash", {"command": "echo ran > proof.txt"}), faux.text("done")],
            name="scripted",
        )
    ]
"""

APPROVER = """
from mainspring import Approval, hookimpl

name = "own-approver"


@hookimpl
def request_approval(requests):
    return {request.tool_call_id: Approval(True, "own approver") for request in requests}
"""

OTHER_BASH = '''
from mainspring import hookimpl, tool

name = "other-bash"


@tool
def bash(command: str) -> str:
    """Pretend to run a command."""
    with open("proof.txt", "w") as file:
        file.write("other")
    return "pretended"


@hookimpl
def register_tools(agent):
    return [bash]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "scripted_plugin.py").write_text(SCRIPTED)
    (tmp_path / "own_approver.py").write_text(APPROVER)
    (tmp_path / "other_bash.py").write_text(OTHER_BASH)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["MAINSPRING_DATA_DIR"] = str(tmp_path / "data")
    return env


def run(env: dict[str, str], where: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["run", "go", "-m", "scripted:x", "--no-session", "--plugin", "scripted_plugin"]
    return run_cli([*args, *extra], env, cwd=where)


def test_without_a_terminal_bash_is_refused_before_it_runs(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = run(env, tmp_path, "--plugin", "mainspring_coding_tools")

    assert done.returncode == 0, done.stderr
    assert "approval: bash" in done.stderr and "refused" in done.stderr
    assert "asks before bash and write run" in done.stderr
    assert not (tmp_path / "proof.txt").exists()


def test_yes_lets_bash_run(env: dict[str, str], tmp_path: Path) -> None:
    done = run(env, tmp_path, "--plugin", "mainspring_coding_tools", "--yes")

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "proof.txt").read_text().strip() == "ran"


def test_a_configured_approver_decides_alone(env: dict[str, str], tmp_path: Path) -> None:
    done = run(env, tmp_path, "--plugin", "mainspring_coding_tools", "--plugin", "own_approver")

    assert done.returncode == 0, done.stderr
    assert "approval:" not in done.stderr  # nothing was asked
    assert (tmp_path / "proof.txt").read_text().strip() == "ran"


def test_another_plugins_bash_is_not_caught(env: dict[str, str], tmp_path: Path) -> None:
    done = run(env, tmp_path, "--plugin", "other_bash")

    assert done.returncode == 0, done.stderr
    assert "approval:" not in done.stderr
    assert (tmp_path / "proof.txt").read_text() == "other"


def test_on_a_terminal_bash_asks_and_runs_once_allowed(
    env: dict[str, str], tmp_path: Path, pty_terminal: type[Terminal]
) -> None:
    env = {**env, "MAINSPRING_WORKSPACE": str(tmp_path)}  # where bash runs
    args = ["-m", "mainspring", "run", "go", "-m", "scripted:x", "--no-session"]
    plugins = ["--plugin", "scripted_plugin", "--plugin", "mainspring_coding_tools"]
    terminal = pty_terminal([sys.executable, *args, *plugins], env)
    try:
        terminal.expect('approve bash {"command": "echo ran > proof.txt"}?')
        assert not (tmp_path / "proof.txt").exists()  # asked before it ran
        terminal.type("y\n")
        terminal.expect("done")
        assert terminal.close() == 0
        assert (tmp_path / "proof.txt").read_text().strip() == "ran"
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.process.wait(timeout=15)
        os.close(terminal.master)
