"""The terminal as an approver: ``mainspring run`` and ``chat`` ask the person at the keyboard.

When a gate asks for approval of a tool call (``before_tool_call`` returned ``Ask``), the
CLI shows the call (tool, arguments, the gate's reason) on stderr and reads ``y`` (allow),
``n`` (refuse), ``a`` (always: allow this exact call, same arguments, for the rest of the
session) or ``t`` (allow the whole tool for the rest of the session), one call at a time.
With ``--yes`` or ``--no`` it answers without asking; without a terminal (piped input) it
refuses, since nobody is there to ask. Either way it says so on stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, TextIO

from ..errors import Approval, ApprovalRequest
from ..hookspecs import hookimpl
from ..workers import in_daemon_thread

__all__ = ["Mode", "TerminalApprover"]

Mode = Literal["ask", "yes", "no"]

_ARGUMENTS_SHOWN = 300
"""Characters of a call's arguments shown when asking."""


def _read_line() -> str:
    return sys.stdin.readline()


def describe_call(request: ApprovalRequest) -> str:
    """``tool {arguments}``, the arguments shortened for one line."""
    try:
        text = json.dumps(request.arguments, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = "{...}"
    if len(text) > _ARGUMENTS_SHOWN:
        text = text[: _ARGUMENTS_SHOWN - 1] + "…"
    return f"{request.tool_name} {text}"


class TerminalApprover:
    """An in-process plugin answering ``request_approval`` from the terminal.

    ``mode`` is ``"ask"`` (read an answer per call), ``"yes"`` or ``"no"`` (answer every
    call without asking). ``read_line`` returns the next line the person typed (``""`` at
    end of input, which refuses); ``chat`` reads it with its line editor.
    """

    name = "terminal-approver"

    def __init__(
        self,
        mode: Mode,
        err: TextIO | None = None,
        read_line: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        self.mode = mode
        self.err = err or sys.stderr
        self.read_line = read_line or self._read_stdin

    @staticmethod
    async def _read_stdin() -> str:
        # a daemon thread: a prompt nobody answers never holds up the program's exit
        return await in_daemon_thread(_read_line, name="mainspring-approval-input")

    def _say(self, text: str) -> None:
        self.err.write(text)
        self.err.flush()

    @hookimpl
    async def request_approval(
        self, requests: tuple[ApprovalRequest, ...]
    ) -> Mapping[str, Approval]:
        """Answer each request: by ``mode``, or by what the person types."""
        answers: dict[str, Approval] = {}
        for request in requests:
            call = describe_call(request)
            if self.mode != "ask":
                allow = self.mode == "yes"
                verdict = "allowed (--yes)" if allow else "refused (--no or no terminal)"
                self._say(f"approval: {call} ({request.reason}): {verdict}\n")
                answers[request.tool_call_id] = Approval(allow, reason=f"the terminal: {verdict}")
                continue
            answers[request.tool_call_id] = await self._ask(call, request.reason)
        return answers

    async def _ask(self, call: str, reason: str) -> Approval:
        while True:
            self._say(
                f"\napprove {call}?\n  {reason}\n"
                "  [y]es / [n]o / [a]lways this call / always this [t]ool: "
            )
            answer = (await self.read_line()).strip().lower()
            if answer in ("y", "yes"):
                return Approval(True, reason="approved at the terminal")
            if answer in ("a", "always"):
                return Approval(True, reason="approved at the terminal (always)", remember="call")
            if answer in ("t", "tool"):
                return Approval(
                    True, reason="approved at the terminal (the whole tool)", remember="tool"
                )
            if answer in ("n", "no", ""):
                return Approval(False, reason="refused at the terminal")
            self._say("please answer y, n, a or t\n")


def approval_mode(yes: bool, no: bool, interactive: bool) -> Mode:
    """The mode for ``--yes``/``--no`` and whether there is a terminal to ask."""
    if yes:
        return "yes"
    if no or not interactive:
        return "no"
    return "ask"
