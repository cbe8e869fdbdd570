"""``mainspring chat``: an interactive loop over one agent.

On a terminal it starts with a banner (version, model, plugin and tool counts, where the
conversation is kept) and reads each prompt with a line editor (:mod:`.line_editor`:
history, editing, multi-line input, Tab-completed slash commands, Ctrl-C clears the line
and twice quits). While a reply streams, what is typed is not echoed into it: it collects
apart (:mod:`.typeahead`, shown beside the spinner or on the line under the reply) and
Enter sends it to steer the run (delivered at the start of its next turn; its note is
printed when the turn ends, between the turns); what is typed but not sent comes back in
the next prompt. A blank line separates one exchange from the next, and a reply that was
cut off ends with the notice ``run`` prints. When a tool call waits for approval, the
next line typed is the answer (``y``/``n``/``a``/``t``). Ctrl-C aborts the active run, not
the program.

Without a terminal (piped input) each line is a prompt, answered before the next is read.

Slash commands: ``/help``, ``/model [provider:id]``, ``/session``, ``/prompt [NAME
ARG=VALUE...]`` (an MCP server's prompt, :mod:`.chat_prompts`), ``/quit`` (``/exit``).
The exit code is the last run's, as for ``run``: 0 done (or no run), 1 error or aborted,
3 the reply was cut off at the output-token limit or by the repetition guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from .. import __version__
from ..agent import Agent
from .approve import TerminalApprover
from .chat_prompts import is_prompt_command, prompt_messages
from .errors import usage_error
from .render import TerminalRenderer, cut_notice

__all__ = ["COMMANDS", "chat"]

PROMPT = "> "
COMMANDS = ("/help", "/model", "/session", "/prompt", "/quit", "/exit")
HELP = """\
/help              this help
/model [P:ID]      show the model, or use provider P's model ID from the next prompt on
/session           where this conversation is kept
/prompt [NAME A=V] list the MCP servers' prompts, or send one with its arguments
/quit, /exit       end the chat (so do Ctrl-D, and Ctrl-C twice on an empty line)
Enter sends; Alt-Enter (Esc, Enter) starts a new line; a paste is one prompt.
Up/Down and Ctrl-R: history. Tab completes a command. Ctrl-C clears the line.
While a reply streams, type and press Enter to steer the run; Ctrl-C aborts it."""


def _read_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    for line in sys.stdin:
        loop.call_soon_threadsafe(queue.put_nowait, line)
    loop.call_soon_threadsafe(queue.put_nowait, None)


def _exit_code(renderer: TerminalRenderer, agent: Agent, err: TextIO) -> int:
    """The code ``run`` would exit with after the run that just ended; a reply that was
    cut off gets the notice ``run`` prints, on ``err``."""
    if renderer.reason not in ("stop", "stopped_by_hook", "terminated"):
        return 1
    notice = cut_notice(agent.last_message)
    if notice:
        print(notice, file=err, flush=True)
        return 3
    return 0


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


def banner(agent: Agent) -> str:
    """The first lines ``chat`` prints on a terminal."""
    model = agent.state.model
    infos = agent.plugins.infos
    plugins = (
        f"{_count(len(infos), 'plugin')} ({sum(i.source == 'builtin' for i in infos)} built-in)"
    )
    tools = len(agent.state.tools)
    session = agent.settings.session_path
    kept = f"kept in {session}" if session else "not kept (--no-session)"
    earlier = len(agent.state.messages)
    if earlier:
        kept += f" (continued: {_count(earlier, 'message')} so far)"
    return (
        f"mainspring {__version__} · {model.provider}:{model.id} · {plugins}"
        f" · {_count(tools, 'tool')}\nthis conversation is {kept}\n/help for commands and keys; "
        "Ctrl-D to quit"
    )


def _command(agent: Agent, text: str, err: TextIO) -> bool | None:
    """Carry out the slash command ``text``: ``True`` to quit, ``False`` when done, ``None``
    when ``text`` is not a command (a prompt that starts with a path, say)."""
    name, _, argument = text.partition(" ")
    argument = argument.strip()
    if name in ("/quit", "/exit"):
        return True
    if name == "/help":
        print(HELP, file=err)
    elif name == "/session":
        print(agent.settings.session_path or "not kept (--no-session)", file=err)
    elif name == "/model" and argument:
        try:
            agent.configure(model=argument)
        except ValueError as error:
            usage_error(error, err)
        else:
            model = agent.state.model
            print(f"model: {model.provider}:{model.id}", file=err)
    elif name == "/model":
        model = agent.state.model
        print(f"model: {model.provider}:{model.id}", file=err)
    elif name == "/prompt":
        print("/prompt sends once the reply has ended", file=err)
    elif "/" not in name[1:]:
        print(f"unknown command {name} (/help lists them)", file=err)
    else:
        return None
    err.flush()
    return False


async def chat(agent: Agent, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the interactive loop until the person quits or input ends; returns the exit
    code (see the module docstring)."""
    out = out or sys.stdout
    err = err or sys.stderr
    renderer = TerminalRenderer(out, err)
    agent.subscribe(renderer)
    if sys.stdin.isatty() and sys.platform != "win32":
        return await _Terminal(agent, renderer, out, err).loop()
    return await _piped(agent, renderer, out, err)


class _Terminal:
    """The loop on a terminal: the line editor at the prompt, type-ahead during runs."""

    def __init__(self, agent: Agent, renderer: TerminalRenderer, out: TextIO, err: TextIO):
        from .line_editor import LineEditor
        from .sessions_cmd import data_dir
        from .typeahead import TypeAhead

        self.agent, self.renderer, self.out, self.err = agent, renderer, out, err
        self.editor = LineEditor(Path(data_dir()) / "chat_history", COMMANDS, err)
        self.typeahead = TypeAhead(sys.stdin.fileno(), self._steer, self._typing)
        self.interrupted = False
        self.quitting = False
        for info in agent.plugins.infos:
            if isinstance(info.plugin, TerminalApprover):
                info.plugin.read_line = self._answer

    def _typing(self, text: str) -> None:
        self.renderer.show_typed(text)

    def _steer(self, text: str) -> None:
        self.renderer.show_typed("")
        if text.startswith("/"):
            self.renderer.note(f"» {text}")
            done = _command(self.agent, text, self.err)
            if done:  # /quit during a run: abort it, then end the chat
                self.quitting = True
                self.agent.abort("chat ended")
            if done is not None:
                return
        if self.agent.state.is_streaming:
            self.agent.steer(text)
            # printed between the turns, not into the reply: shown under it until then
            self.renderer.queue_note(
                f"» {text}  (steering: delivered at the start of the next turn)"
            )
        else:
            self.typeahead.pending = text  # the run just ended: it is the next prompt

    async def _answer(self) -> str:
        """The terminal approver's next answer, typed with the line editor."""
        started = self.typeahead.started
        self.typeahead.stop()
        try:
            return await self.editor.read_answer()
        except KeyboardInterrupt:
            self._interrupt()
            return ""
        finally:
            if started and self.agent.state.is_streaming:
                self.typeahead.start()

    def _interrupt(self) -> None:
        if self.agent.state.is_streaming:
            self.renderer.note("(aborting the run; Ctrl-C again at the prompt to quit)")
            self.interrupted = True
            self.agent.abort("interrupted")

    async def _run(self, text: str | list[Any]) -> int:
        await self.renderer.prepare(self.agent)
        task = asyncio.ensure_future(self.agent.prompt(text))
        self.typeahead.start()
        try:
            await asyncio.wait([task])
        finally:
            self.typeahead.stop()
            self.renderer.show_typed("")
        code = _exit_code(self.renderer, self.agent, self.err)
        print(file=self.err, flush=True)  # a blank line between one exchange and the next
        return code

    async def loop(self) -> int:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._interrupt)
        print(banner(self.agent), file=self.err, flush=True)
        code = 0
        try:
            while True:
                armed, self.interrupted = self.interrupted, False
                line = await self.editor.read(PROMPT, self.typeahead.take(), armed)
                if line is None:
                    break
                text = line.strip()
                if not text:
                    continue
                if is_prompt_command(text):
                    messages = await prompt_messages(self.agent, text, self.err)
                    if messages:
                        code = await self._run(messages)
                    if self.quitting:
                        break
                    continue
                if text.startswith("/"):
                    done = _command(self.agent, text, self.err)
                    if done:
                        break
                    if done is not None:
                        continue
                code = await self._run(text)
                if self.quitting:
                    break
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            self.typeahead.stop()
        return code


async def _piped(agent: Agent, renderer: TerminalRenderer, out: TextIO, err: TextIO) -> int:
    """The loop over piped input: each line a prompt, answered before the next is read."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    threading.Thread(target=_read_lines, args=(loop, queue), daemon=True).start()
    code = 0
    stop = False
    answered = False

    def interrupt() -> None:  # abort the active run, else end the chat
        nonlocal stop
        if agent.state.is_streaming:
            agent.abort("interrupted")
        else:
            stop = True
            queue.put_nowait(None)

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, interrupt)
    try:
        while not stop:
            line = await queue.get()
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            sent: str | list[Any] = text
            if is_prompt_command(text):
                messages = await prompt_messages(agent, text, err)
                if not messages:
                    continue
                sent = messages
            elif text.startswith("/"):
                done = _command(agent, text, err)
                if done:
                    break
                if done is not None:
                    continue
            if answered:
                print(file=out, flush=True)  # a blank line between one reply and the next
            await renderer.prepare(agent)
            await agent.prompt(sent)
            code = _exit_code(renderer, agent, err)
            answered = True
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        out.flush()
    return code
