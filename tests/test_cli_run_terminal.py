"""``mainspring run`` on a pseudo-terminal, checked on the screen a terminal shows: the first
streamed words survive the spinner, a running tool shows a start line and a spinner with
its name and the seconds elapsed, a model that loads or writes a tool call shows what it
is doing, and a cut-off reply says so and exits 3."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Terminal

PLUGIN = '''
import asyncio, os
from mainspring import hookimpl, tool
from mainspring.messages import UserMessage, ToolResultMessage
from mainspring.providers.base import StreamDone, TextDelta, ToolCallStart, ToolCallDelta
from mainspring.providers.base import ToolCallEnd

name = "staged"


def gate(step):
    """Wait until the test lets this step go on (it creates the file)."""
    return os.path.exists(os.path.join(os.environ["STAGE_DIR"], step))


class Staged:
    name = "staged"
    models = {}

    async def warm_up(self, model):
        if gate("cold"):  # a model that takes a while to load
            while not gate("loaded"):
                await asyncio.sleep(0.01)

    async def stream(self, request, signal):
        prompt = [m.content for m in request.messages if isinstance(m, UserMessage)][-1]
        answered = isinstance(request.messages[-1], ToolResultMessage)
        if prompt == "story":
            while not gate("speak"):  # the spinner turns meanwhile
                await asyncio.sleep(0.01)
            for word in ["Once", " upon", " a", " time"]:
                yield TextDelta(word)
            yield StreamDone("stop")
        elif prompt == "long story":
            yield TextDelta("It was a dark and")
            yield StreamDone("length")
        elif prompt == "plan" and not answered:
            yield ToolCallStart("c1", "compile")
            while not gate("written"):  # the arguments are still being written
                await asyncio.sleep(0.01)
            yield ToolCallDelta("c1", '{"target": "all"}')
            yield ToolCallEnd("c1")
            yield StreamDone("tool_use")
        elif prompt == "build" and not answered:
            yield ToolCallStart("c1", "compile")
            yield ToolCallDelta("c1", '{"target": "all"}')
            yield ToolCallEnd("c1")
            yield StreamDone("tool_use")
        else:
            yield TextDelta("built")
            yield StreamDone("stop")


@tool
async def compile(target: str) -> str:
    """Compile a target (until the test says it is done)."""
    while not gate("compiled"):
        await asyncio.sleep(0.01)
    return f"compiled {target}"


@hookimpl
def register_providers():
    return [Staged()]


@hookimpl
def register_tools(agent):
    return [compile]
'''


@pytest.fixture
def run(tmp_path: Path, pty_terminal: type[Terminal]) -> Iterator[Callable[[str], Terminal]]:
    (tmp_path / "staged_plugin.py").write_text(PLUGIN)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["STAGE_DIR"] = str(tmp_path)
    env["TERM"] = "xterm"
    started: list[Terminal] = []

    def run(prompt: str) -> Terminal:
        args = ["-m", "mainspring", "run", prompt, "--plugin", "staged_plugin"]
        terminal = pty_terminal([sys.executable, *args, "--model", "staged:x"], env)
        started.append(terminal)
        return terminal

    yield run
    for terminal in started:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.process.wait(timeout=15)
        os.close(terminal.master)


def test_the_first_streamed_words_survive_the_spinner(
    run: Callable[[str], Terminal], tmp_path: Path
) -> None:
    terminal = run("story")
    terminal.expect("⠙")  # the spinner has turned at least twice
    (tmp_path / "speak").touch()
    assert terminal.close() == 0
    terminal.expect("time")
    assert "Once upon a time" in terminal.display()


def test_a_running_tool_shows_a_start_line_and_its_seconds(
    run: Callable[[str], Terminal], tmp_path: Path
) -> None:
    terminal = run("build")
    terminal.expect_shown('→ compile {"target": "all"}')
    terminal.expect_shown("compile · 1.")  # the spinner names it and counts the seconds
    (tmp_path / "compiled").touch()
    terminal.expect_shown("built")
    assert terminal.close() == 0
    lines = terminal.display()
    ended = [line for line in lines if line.startswith("• compile")]
    assert len(ended) == 1 and ended[0].startswith('• compile {"target": "all"} ok (')
    assert ended[0].endswith("s) compiled all")
    assert not any("compile ·" in line for line in lines)  # the spinner is gone


def test_a_reply_cut_at_the_output_limit_says_so_and_exits_3(
    run: Callable[[str], Terminal],
) -> None:
    terminal = run("long story")
    assert terminal.close() == 3
    terminal.expect("stop_reason=length")
    lines = [line for line in terminal.display() if line]
    assert lines[-2:] == [
        "It was a dark and",
        "mainspring: the reply was cut off at the model's output-token limit (stop_reason=length)",
    ]


def test_a_loading_model_is_named_on_the_spinner(
    run: Callable[[str], Terminal], tmp_path: Path
) -> None:
    (tmp_path / "cold").touch()
    (tmp_path / "speak").touch()
    terminal = run("story")
    terminal.expect_shown("loading staged:x · ")
    (tmp_path / "loaded").touch()
    assert terminal.close() == 0
    terminal.expect("time")
    lines = terminal.display()
    assert "Once upon a time" in lines
    assert not any("loading" in line for line in lines)  # the spinner's line is gone


def test_a_tool_call_being_written_shows_on_the_spinner(
    run: Callable[[str], Terminal], tmp_path: Path
) -> None:
    terminal = run("plan")
    terminal.expect_shown("writing a call to compile · ~1 token · ")
    (tmp_path / "written").touch()
    terminal.expect_shown('→ compile {"target": "all"}')
    (tmp_path / "compiled").touch()
    assert terminal.close() == 0
    terminal.expect("built")
    assert not any("writing a call" in line for line in terminal.display())
