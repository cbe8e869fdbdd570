"""``mainspring chat``: an interactive loop over one agent.

Each line typed at the ``>`` prompt starts a run; a line typed while a run is active
steers it (delivered at the start of its next turn), unless a tool call is waiting for
approval: then the line is the answer (``y``/``n``/``a``). Ctrl-C aborts the active run, not
the program; at the prompt, Ctrl-C or Ctrl-D (or ``/exit``) ends the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from typing import Any, TextIO

from ..kernel.agent import Agent
from .approve import TerminalApprover
from .render import TerminalRenderer

__all__ = ["chat"]

PROMPT = "> "


def _read_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    for line in sys.stdin:
        loop.call_soon_threadsafe(queue.put_nowait, line)
    loop.call_soon_threadsafe(queue.put_nowait, None)


async def chat(agent: Agent, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the interactive loop until end of input; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    renderer = TerminalRenderer(out, err)
    agent.subscribe(renderer)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    threading.Thread(target=_read_lines, args=(loop, queue), daemon=True).start()
    running: asyncio.Task[Any] | None = None
    quit_requested = asyncio.Event()
    answer: asyncio.Future[str] | None = None

    async def next_answer() -> str:
        # the terminal approver's next line: the loop below hands it the next line typed
        nonlocal answer
        answer = loop.create_future()
        try:
            return await answer
        finally:
            answer = None

    for info in agent.plugins.infos:
        if isinstance(info.plugin, TerminalApprover):
            info.plugin.read_line = next_answer

    def show_prompt(_: Any = None) -> None:
        out.write(PROMPT)
        out.flush()

    def on_interrupt() -> None:
        if agent.state.is_streaming:
            err.write("\n(aborting the run; Ctrl-C again at the prompt to quit)\n")
            agent.abort("interrupted")
        else:
            quit_requested.set()
            queue.put_nowait(None)

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    show_prompt()
    try:
        while not quit_requested.is_set():
            line = await queue.get()
            if answer is not None and not answer.done():
                answer.set_result(line or "")  # an approval question is waiting for it
                if line is None:
                    queue.put_nowait(None)  # end of input: the loop ends after the run
                continue
            if line is None:
                break
            text = line.strip()
            if text in ("/exit", "/quit"):
                break
            if not text:
                if running is None or running.done():
                    show_prompt()
                continue
            if agent.state.is_streaming:
                agent.steer(text)
                err.write("(steering: delivered at the start of the next turn)\n")
                err.flush()
                continue
            running = asyncio.create_task(agent.prompt(text))
            running.add_done_callback(show_prompt)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        if running is not None and not running.done():
            agent.abort("chat ended")
            await asyncio.wait([running])
        out.write("\n")
        out.flush()
    return 0
