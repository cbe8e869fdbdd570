"""``mainspring chat`` through a pseudo-terminal: steering by typing (what is typed shows
under the streaming reply, the steering note between the turns), Ctrl-C aborts the run,
exchanges are separated; piped, a cut reply ends with ``run``'s notice."""

from __future__ import annotations

import os
import subprocess
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
        if "slowly" in users[-1] and self.calls == 1:
            import os
            yield TextDelta("part one")
            while not os.path.exists(os.environ["CHAT_GATE"]):
                await asyncio.sleep(0.01)
            yield TextDelta(" part two")
            yield StreamDone("stop")
            return
        if "cut" in users[-1]:
            yield TextDelta("a reply that goes on and o")
            yield StreamDone("length")
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


def test_typed_text_shows_under_the_reply_and_its_note_comes_between_the_turns(
    terminal: Terminal, tmp_path: Path
) -> None:
    terminal.at_prompt()
    terminal.type("slowly\r")
    terminal.expect_shown("part one")
    terminal.type("steer me")
    terminal.until(
        lambda: (lines := terminal.display()) and "» steer me" in lines,
        "the typed text on its own line",
    )
    lines = terminal.display()
    assert lines.index("» steer me") == lines.index("part one") + 1  # under the reply
    terminal.type("\r")
    terminal.expect_shown("(steering")
    (tmp_path / "gate").touch()
    terminal.expect_shown("seen: slowly | steer me")
    terminal.at_prompt()
    lines = [line for line in terminal.display() if line]
    reply = lines.index("part one part two")  # the reply was not split by the note
    note = lines.index("» steer me  (steering: delivered at the start of the next turn)")
    assert reply < note < lines.index("seen: slowly | steer me")
    assert sum("steer me" in line for line in lines) == 2  # the note, the next reply
    terminal.type("/exit\r")
    assert terminal.close() == 0


def test_exchanges_are_separated_by_a_blank_line(terminal: Terminal) -> None:
    terminal.at_prompt()
    terminal.type("one\r")
    terminal.expect_shown("seen: one")
    terminal.at_prompt()
    terminal.type("two\r")
    terminal.expect_shown("seen: one | two")
    terminal.at_prompt()
    lines = terminal.display()
    first = lines.index("seen: one")
    assert lines[first + 1] == ""  # then the next prompt
    terminal.type("/exit\r")
    assert terminal.close() == 0


def test_a_cut_reply_in_chat_ends_with_the_notice_run_prints(tmp_path: Path) -> None:
    (tmp_path / "chat_plugin.py").write_text(CHAT_PLUGIN)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), MAINSPRING_DISABLE_PLUGIN_AUTOLOAD="1")
    args = ["-m", "mainspring", "chat", "--plugin", "chat_plugin", "--model", "slow:x"]
    done = subprocess.run(
        [sys.executable, *args],
        input="cut it\ncut again\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )

    notice = (
        "mainspring: the reply was cut off at the model's output-token limit (stop_reason=length)"
    )
    assert done.stderr.count(notice) == 2, done.stderr
    assert done.returncode == 3
    # piped, the replies are separated by a blank line
    assert "goes on and o\n\na reply" in done.stdout
