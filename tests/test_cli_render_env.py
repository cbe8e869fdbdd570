"""The terminal renderer honours ``NO_COLOR`` and ``TERM=dumb``.

Colours and the spinner appear only when stderr is a terminal; ``NO_COLOR`` (set and not
empty) turns colours off, ``TERM=dumb`` turns off colours and the spinner.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from mainspring import Agent, Block, hookimpl, tool
from mainspring.cli.render import TerminalRenderer
from mainspring.testing import FauxProvider, faux


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@tool
def fail(text: str) -> str:
    """Always fails."""
    raise RuntimeError("nope")


async def render(environ: dict[str, str], err: io.StringIO | None = None) -> TerminalRenderer:
    out, err = io.StringIO(), err if err is not None else Terminal()
    renderer = TerminalRenderer(out, err, environ=environ)
    provider = FauxProvider([faux.tool_call("fail", {"text": "x"}), faux.text("done")])
    agent = Agent(model="faux:t", provider=provider, tools=[fail], autoload=False)
    agent.subscribe(renderer)
    await agent.prompt("go")
    assert out.getvalue() == "done\n"
    return renderer


def stderr_of(renderer: TerminalRenderer) -> str:
    value = renderer.err.getvalue()  # type: ignore[attr-defined]
    assert isinstance(value, str)
    return value


async def test_a_terminal_gets_colours_and_the_spinner() -> None:
    renderer = await render({"TERM": "xterm-256color"})
    assert renderer.interactive and renderer.color
    assert '\x1b[31m• fail {"text": "x"} error' in stderr_of(renderer)


@pytest.mark.parametrize("value", ["1", "true", "anything"])
async def test_no_color_turns_colours_off(value: str) -> None:
    renderer = await render({"TERM": "xterm", "NO_COLOR": value})
    assert not renderer.color
    assert renderer.interactive  # the spinner is not colour
    text = stderr_of(renderer)
    assert '• fail {"text": "x"} error' in text
    assert "\x1b[" not in text


async def test_an_empty_no_color_does_not() -> None:
    renderer = await render({"TERM": "xterm", "NO_COLOR": ""})
    assert renderer.color


async def test_a_dumb_terminal_gets_neither_colours_nor_the_spinner() -> None:
    renderer = await render({"TERM": "dumb"})
    assert not renderer.color and not renderer.interactive
    text = stderr_of(renderer)
    assert '• fail {"text": "x"} error' in text
    assert "\x1b[" not in text
    assert "\r" not in text


async def test_no_terminal_no_colours() -> None:
    renderer = await render({"TERM": "xterm"}, err=io.StringIO())
    assert not renderer.color and not renderer.interactive
    assert "\x1b[" not in stderr_of(renderer)


async def test_the_first_streamed_text_survives_the_spinner_on_a_terminal() -> None:
    """Out and err are one terminal: erasing the spinner must not wipe streamed text."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    renderer = TerminalRenderer(screen, screen, environ={"TERM": "xterm"})

    async def thinking_first(request: Any) -> Any:
        await asyncio.sleep(0.05)  # the model takes a while: the spinner turns meanwhile
        return faux.text("The answer")

    provider = FauxProvider([thinking_first], delay_s=0.001)
    agent = Agent(model="faux:test", provider=provider, autoload=False)
    agent.subscribe(renderer)
    await agent.prompt("go")

    written = screen.getvalue()
    start = written.index("The answer")
    # nothing moves the cursor back over the reply's line once it has begun
    assert "\r" not in written[start : written.index("\n", start)]


async def test_a_blocked_call_is_shown_as_blocked_by_the_plugin() -> None:
    class Gate:
        name = "policy"

        @hookimpl
        def before_tool_call(self) -> Block:
            return Block("not in this workspace")

    err = io.StringIO()
    renderer = TerminalRenderer(io.StringIO(), err, environ={})
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.tool_call("fail", {"text": "x"}), faux.text("ok")]),
        autoload=False,
        tools=[fail],
        plugins=[Gate()],
    )
    agent.subscribe(renderer)
    await agent.prompt("go")

    assert "• fail blocked by policy: not in this workspace" in err.getvalue()
    assert "• fail {" not in err.getvalue()


async def test_a_slow_reply_ends_with_its_tokens_and_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    from mainspring.cli import render as render_module

    monkeypatch.setattr(render_module, "SLOW_REPLY_S", 0.0)  # every reply counts as slow
    renderer = await render({"TERM": "xterm"})
    lines = [line for line in stderr_of(renderer).split("\n") if "tokens/s" in line]
    assert len(lines) == 2  # the tool call's reply and the answer
    assert "tokens in " in lines[0]


async def test_without_a_terminal_no_rate_line_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    from mainspring.cli import render as render_module

    monkeypatch.setattr(render_module, "SLOW_REPLY_S", 0.0)
    renderer = await render({"TERM": "xterm"}, err=io.StringIO())
    assert "tokens/s" not in stderr_of(renderer)
