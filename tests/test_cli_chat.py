"""``mainspring chat`` through a pseudo-terminal: steering by typing, Ctrl-C aborts the run."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Terminal

CHAT_PLUGIN = '''
import asyncio
from mainspring import hookimpl
from mainspring.providers.base import StreamDone, TextDelta
from mainspring.messages import UserMessage

name = "chatty"


class Slow:
    """Echoes every user message it was sent; the first reply waits for the gate file."""

    name = "slow"
    models = {}

    def __init__(self):
        self.calls = 0

    async def stream(self, request, signal):
        self.calls += 1
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        if "hold" in users[-1]:
            yield TextDelta("holding ")
            while not signal.aborted:
                await asyncio.sleep(0.01)
            return
        if "tool" in users[-1] and self.calls == 1:
            from mainspring.providers.base import ToolCallStart, ToolCallDelta, ToolCallEnd
            yield ToolCallStart("c1", "wait")
            yield ToolCallDelta("c1", "{}")
            yield ToolCallEnd("c1")
            yield StreamDone("tool_use")
            return
        yield TextDelta("seen: " + " | ".join(users))
        yield StreamDone("stop")


from mainspring import tool


@tool
async def wait() -> str:
    """Wait until the steering line arrives."""
    import os
    while not os.path.exists(os.environ["CHAT_GATE"]):
        await asyncio.sleep(0.01)
    return "waited"


@hookimpl
def register_providers():
    return [Slow()]


@hookimpl
def register_tools(agent):
    return [wait]


@hookimpl
def on_event(event):
    import os
    if event.type == "tool_execution_start":
        open(os.environ["CHAT_STARTED"], "w").close()
'''


@pytest.fixture
def terminal(tmp_path: Path, pty_terminal: type[Terminal]) -> Iterator[Terminal]:
    (tmp_path / "chat_plugin.py").write_text(CHAT_PLUGIN)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["CHAT_GATE"] = str(tmp_path / "gate")
    env["CHAT_STARTED"] = str(tmp_path / "started")
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"  # the test terminal answers no cursor-position query
    args = [sys.executable, "-m", "mainspring", "chat", "--plugin", "chat_plugin"]
    session = pty_terminal([*args, "--model", "slow:x"], env)
    yield session
    if session.process.poll() is None:
        session.process.kill()
        session.process.wait(timeout=15)
    os.close(session.master)


def test_typing_during_a_run_steers_it(terminal: Terminal, tmp_path: Path) -> None:
    terminal.at_prompt()
    terminal.type("use the tool\r")
    deadline = time.monotonic() + 15
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline, terminal.screen
        terminal.expect("", timeout=0.05)
    terminal.type("and also this\r")
    terminal.expect("(steering")
    (tmp_path / "gate").touch()
    terminal.expect("seen: use the tool | and also this")
    terminal.at_prompt()
    terminal.type("/exit\r")
    assert terminal.close() == 0


def test_ctrl_c_aborts_the_run_not_the_program(terminal: Terminal) -> None:
    terminal.at_prompt()
    terminal.type("hold on\r")
    terminal.expect("holding")
    terminal.type("\x03")
    terminal.expect("aborted")
    terminal.at_prompt()
    terminal.type("hello again\r")
    terminal.expect("seen: hold on | hello again")
    terminal.at_prompt()
    terminal.type("/exit\r")
    assert terminal.close() == 0
