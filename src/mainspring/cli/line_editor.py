"""The ``chat`` prompt: a line editor on a terminal (prompt-toolkit, imported only here).

What a person gets at the ``>`` prompt:

- editing (Left/Right, Home/End, Ctrl-A/E/K/U/W…) and history (Up/Down, Ctrl-R), kept
  across sessions in ``DATA/chat_history`` (see :func:`~mainspring.cli.sessions_cmd.data_dir`);
- multi-line input: a paste is one prompt, whatever newlines it holds; Alt-Enter (Esc,
  then Enter) starts a new line; Enter sends;
- Tab completes the slash commands it is given;
- Ctrl-C clears the line; on an empty line it says how to quit, and a second Ctrl-C (with
  nothing typed in between) quits; Ctrl-D on an empty line quits.

Answers to approval questions are read by :meth:`LineEditor.read_answer`, with the same
editing but no history; Ctrl-C there raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

__all__ = ["QUIT_HINT", "LineEditor"]

QUIT_HINT = "(Ctrl-C again, Ctrl-D or /quit to quit)"


class SlashCompleter(Completer):
    """Completes a slash command typed at the start of the line."""

    def __init__(self, commands: Sequence[str]) -> None:
        self.commands = list(commands)

    def get_completions(self, document: Document, complete_event: Any) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or " " in typed or "\n" in typed:
            return
        for command in self.commands:
            if command.startswith(typed):
                yield Completion(command, start_position=-len(typed))


def _history(path: Path | None, err: TextIO) -> History:
    """A history kept in ``path`` (its directory made if needed), else in memory."""
    if path is None:
        return InMemoryHistory()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
    except OSError as error:
        print(
            f"mainspring: warning: the prompt history is not kept ({path}: {error.strerror})",
            file=err,
            flush=True,
        )
        return InMemoryHistory()
    return FileHistory(str(path))


class LineEditor:
    """Reads prompts and answers from the terminal (see the module docstring).

    ``history`` is the file that keeps what was sent (``None``: this session only),
    ``commands`` the slash commands Tab completes, ``err`` where hints are written.
    """

    def __init__(self, history: Path | None, commands: Iterable[str], err: TextIO) -> None:
        self.err = err
        self.armed = False
        """A Ctrl-C now quits: the last key at an empty prompt was Ctrl-C (or the caller
        says one was just pressed, e.g. to abort a run)."""
        bindings = KeyBindings()
        bindings.add("c-c")(self._interrupt)
        bindings.add("escape", "enter")(self._newline)
        self._prompts: PromptSession[str] = PromptSession(
            history=_history(history, err),
            completer=SlashCompleter(list(commands)),
            complete_while_typing=False,
            key_bindings=bindings,
            multiline=False,
            prompt_continuation="… ",
        )
        self._prompts.default_buffer.on_text_changed += self._typed
        answers = KeyBindings()
        answers.add("escape", "enter")(self._newline)
        self._answers: PromptSession[str] = PromptSession(
            history=InMemoryHistory(), key_bindings=answers
        )

    def _typed(self, _: Any) -> None:
        self.armed = False

    @staticmethod
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    def _interrupt(self, event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
            self.armed = True
        elif self.armed:
            event.app.exit(result=None)
        else:
            self.armed = True
            run_in_terminal(lambda: print(QUIT_HINT, file=self.err, flush=True))

    async def read(self, prompt: str, default: str = "", armed: bool = False) -> str | None:
        """The next prompt typed (``default`` pre-filled); ``None`` when the person quits
        (Ctrl-D on an empty line, or a second Ctrl-C). ``armed``: a Ctrl-C was just
        pressed (to abort a run), so one more on an empty line quits."""

        def arm() -> None:  # after the prompt has set up its buffer
            self.armed = armed

        with contextlib.suppress(EOFError):
            text: str | None = await self._prompts.prompt_async(
                prompt, default=default, handle_sigint=False, pre_run=arm
            )
            return text
        return None

    async def read_answer(self) -> str:
        """One answer typed where the cursor is; ``""`` at Ctrl-D. Ctrl-C raises
        ``KeyboardInterrupt``."""
        try:
            return await self._answers.prompt_async("", handle_sigint=False)
        except EOFError:
            return ""
