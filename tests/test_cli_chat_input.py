"""``mainspring chat`` on a pseudo-terminal, as a person types: the line editor (editing,
history across sessions, a paste is one prompt, a key for a new line, Tab completes
commands), the banner, Ctrl-C at the prompt, keys typed while a reply streams, approval
answers, and the exit code of the last run."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Terminal

ECHO_PLUGIN = '''
import asyncio
from mainspring import Ask, hookimpl, tool
from mainspring.messages import UserMessage
from mainspring.providers.base import StreamDone, TextDelta, ToolCallStart, ToolCallDelta
from mainspring.providers.base import ToolCallEnd

name = "echoing"


class Echo:
    """Echoes the user's messages; "hold" streams until aborted, "fail" fails, "push" asks
    to push once."""

    name = "echo"
    models = {}

    async def stream(self, request, signal):
        last = request.messages[-1]
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        if isinstance(last, UserMessage) and "push" in last.content:
            yield ToolCallStart("c1", "push")
            yield ToolCallDelta("c1", '{"branch": "main"}')
            yield ToolCallEnd("c1")
            yield StreamDone("tool_use")
            return
        if "hold" in users[-1]:
            yield TextDelta("holding")
            while not signal.aborted:
                await asyncio.sleep(0.01)
            return
        if "fail" in users[-1]:
            raise RuntimeError("the model fell over")
        yield TextDelta("seen: " + " | ".join(users))
        yield StreamDone("stop")


@tool
def push(branch: str) -> str:
    """Push a branch."""
    return f"pushed {branch}"


@hookimpl
def register_providers():
    return [Echo()]


@hookimpl
def register_tools(agent):
    return [push]


@hookimpl
def before_tool_call(call):
    return Ask("pushing publishes the branch")
'''


@pytest.fixture
def start(tmp_path: Path, pty_terminal: type[Terminal]) -> Iterator[Callable[..., Terminal]]:
    (tmp_path / "echoing_plugin.py").write_text(ECHO_PLUGIN)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"  # the test terminal answers no cursor-position query
    args = [sys.executable, "-m", "mainspring", "chat", "--plugin", "echoing_plugin"]
    started: list[Terminal] = []

    def start(*extra: str) -> Terminal:
        terminal = pty_terminal([*args, "--model", "echo:x", *extra], env)
        started.append(terminal)
        terminal.at_prompt()
        return terminal

    yield start
    for terminal in started:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.process.wait(timeout=15)
        os.close(terminal.master)


def shown(terminal: Terminal) -> str:
    return "\n".join(terminal.display())


def exit_code(terminal: Terminal) -> tuple[int, str]:
    """The program's exit code, and the screen it left (to say why when it is wrong)."""
    code = terminal.close()
    with contextlib.suppress(AssertionError):  # read what is left, however it ends
        terminal.until(lambda: not terminal._read(0.05), "the end of output", timeout=2)
    return code, shown(terminal)


def test_the_banner_names_the_model_the_counts_and_help(start: Callable[..., Terminal]) -> None:
    terminal = start()
    banner = shown(terminal)
    assert "echo:x" in banner
    assert "1 tool" in banner and " plugins" in banner
    assert "/help" in banner


def test_arrow_keys_edit_the_line_instead_of_printing(start: Callable[..., Terminal]) -> None:
    terminal = start()
    terminal.type("wrld" + "\x1b[D" * 3 + "o\r")  # Left three times, then insert "o"
    terminal.expect_shown("seen: world")
    assert "^[[" not in shown(terminal) and "[D" not in shown(terminal)


def test_history_is_kept_across_sessions(start: Callable[..., Terminal]) -> None:
    first = start()
    first.type("remember me\r")
    first.expect_shown("seen: remember me")
    first.at_prompt()
    first.type("\x04")  # Ctrl-D quits
    assert first.close() == 0

    second = start()
    second.type("\x1b[A\r")  # Up recalls the last prompt of the previous session
    second.expect_shown("seen: remember me")


def test_a_paste_is_one_prompt_and_alt_enter_starts_a_new_line(
    start: Callable[..., Terminal],
) -> None:
    terminal = start()
    terminal.type("\x1b[200~line one\rline two\rline three\x1b[201~\r")
    terminal.expect_shown("seen: line one")
    terminal.at_prompt()
    assert terminal.screen.count("seen:") == 1
    lines = terminal.display()
    reply = next(i for i, line in enumerate(lines) if line.startswith("seen: line one"))
    assert lines[reply + 1 : reply + 3] == ["line two", "line three"]

    terminal.type("first\x1b\rsecond\r")  # Esc Enter (Alt-Enter), then Enter
    terminal.expect_shown("line three | first")
    terminal.at_prompt()
    assert terminal.screen.count("seen:") == 2


def test_tab_completes_a_slash_command(start: Callable[..., Terminal]) -> None:
    terminal = start()
    terminal.type("/he\t")
    terminal.at_prompt("> /help")
    terminal.type("\r")
    terminal.expect_shown("/model [P:ID]")


def test_ctrl_c_clears_the_line_and_twice_on_an_empty_line_quits(
    start: Callable[..., Terminal],
) -> None:
    terminal = start()
    terminal.type("typed by mistake")
    terminal.expect_shown("typed by mistake")
    terminal.type("\x03meant this\r")
    terminal.expect_shown("seen: meant this")
    assert "mistake" not in shown(terminal).split("seen:")[1]
    terminal.at_prompt()

    terminal.type("\x03")
    terminal.expect_shown("Ctrl-C again")
    assert terminal.process.poll() is None
    terminal.type("\x03")
    assert terminal.close() == 0


def test_keys_typed_while_a_reply_streams_stay_out_of_it(start: Callable[..., Terminal]) -> None:
    terminal = start()
    terminal.type("hold on\r")
    terminal.expect_shown("holding")
    terminal.type("and this")
    terminal.type("\r")
    terminal.expect_shown("» and this")
    lines = terminal.display()
    assert "holding" in lines
    assert [line for line in lines if "and this" in line] == [
        "» and this  (steering: delivered at the start of the next turn)"
    ]
    terminal.type("\x03")
    terminal.expect_shown("aborted")
    terminal.at_prompt()


def test_typed_but_unsent_keys_come_back_in_the_next_prompt(
    start: Callable[..., Terminal],
) -> None:
    terminal = start()
    terminal.type("hold on\r")
    terminal.expect_shown("holding")
    terminal.type("half typ\x03")
    terminal.at_prompt("> half typ")
    terminal.type("ed\r")
    terminal.expect_shown("hold on | half typed")


def test_an_approval_question_takes_the_next_line(start: Callable[..., Terminal]) -> None:
    terminal = start()
    terminal.type("push it\r")
    terminal.expect_shown('approve push {"branch": "main"}?')
    terminal.type("y\r")
    terminal.expect_shown("• push")
    terminal.expect_shown("seen: push it")
    assert "pushed main" in shown(terminal)


def test_chat_exits_1_when_its_last_run_failed(start: Callable[..., Terminal]) -> None:
    terminal = start()
    terminal.type("please fail\r")
    terminal.expect_shown("the model fell over")
    terminal.at_prompt()
    terminal.type("/quit\r")
    code, screen = exit_code(terminal)
    assert code == 1, screen


def test_chat_exits_0_when_its_last_run_succeeded(start: Callable[..., Terminal]) -> None:
    terminal = start()
    terminal.type("please fail\r")
    terminal.expect_shown("the model fell over")
    terminal.at_prompt()
    terminal.type("then work\r")
    terminal.expect_shown("seen: please fail | then work")
    terminal.at_prompt()
    terminal.type("\x04")
    code, screen = exit_code(terminal)
    assert code == 0, screen


def test_piped_input_is_one_prompt_a_line_each_answered_before_the_end(tmp_path: Path) -> None:
    (tmp_path / "echoing_plugin.py").write_text(ECHO_PLUGIN)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), MAINSPRING_DISABLE_PLUGIN_AUTOLOAD="1")
    args = ["-m", "mainspring", "chat", "--plugin", "echoing_plugin", "--model", "echo:x"]
    done = subprocess.run(
        [sys.executable, *args],
        input="first\nsecond\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "seen: first" in done.stdout
    assert done.stdout.strip().endswith("second")  # the last prompt is answered, not aborted


def test_continuing_a_chat_says_so_in_the_banner(start: Callable[..., Terminal]) -> None:
    first = start()
    first.type("one\r")
    first.expect_shown("seen: one")
    first.at_prompt()
    first.type("/quit\r")
    assert first.close() == 0

    second = start("-c")
    second.expect_shown("(continued: 2 messages so far)")
    second.type("two\r")
    second.expect_shown("seen: one | two")
