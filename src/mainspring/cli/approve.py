"""The terminal as an approver: ``mainspring run`` and ``chat`` ask the person at the keyboard.

When a gate asks for approval of a tool call (``before_tool_call`` returned ``Ask``), the
CLI shows the call on stderr and reads ``y`` (allow), ``n`` (refuse), ``a`` (always: allow
this exact call, same arguments, for the rest of the session), or ``p`` / ``g`` (always:
calls whose chosen string argument starts with a prefix / matches a path glob, the other
arguments as now; see :mod:`mainspring.approval_scopes`), one call at a time. Before it
remembers anything it says what it remembers. Nothing is cut: every argument is shown
whole, with control characters, unusual spaces and runs of spaces made visible
(:func:`visible`); a call longer than a page is shown a page at a time (Enter for the
next) before the question. With ``--yes`` or ``--no`` it answers without asking; without a
terminal (piped input) it refuses, since nobody is there to ask. Either way it says so on
stderr. A running tool's question (an MCP server's elicitation) is answered by
:mod:`mainspring.cli.questions`.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TextIO

from ..approval_scopes import ArgumentScope
from ..contract.decisions import Approval, ApprovalRequest
from ..contract.markers import hookimpl
from ..messages import thaw
from ..workers import in_daemon_thread
from .questions import answer

__all__ = ["Mode", "TerminalApprover", "describe_call", "visible"]

Mode = Literal["ask", "yes", "no"]

LINE_WIDTH = 96
"""Characters of a shown line before it wraps (a wrapped line goes on with ``↪``)."""
PAGE_LINES = 40
"""Lines shown before asking for Enter to show more."""

_HIDDEN_CATEGORIES = ("Cc", "Cf", "Zl", "Zp", "Zs", "Cn", "Co", "Cs")
"""Unicode categories shown as code points: controls, format characters (bidi
overrides, zero-width), separators and spaces, unassigned, private and surrogates."""
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _read_line() -> str:
    return sys.stdin.readline()


def visible(text: str) -> str:
    """``text`` with nothing hidden: a backslash, newline, tab and carriage return as
    ``\\\\``, ``\\n``, ``\\t``, ``\\r``; any other control, format (bidi, zero-width) or
    separator character and any space but U+0020 as ``⟨U+XXXX⟩``; a run of two or more
    spaces as ``⟨N spaces⟩``."""
    out: list[str] = []
    spaces = 0
    for char in text:
        if char == " ":
            spaces += 1
            continue
        out.append(_spaces(spaces))
        spaces = 0
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif unicodedata.category(char) in _HIDDEN_CATEGORIES:
            out.append(f"⟨U+{ord(char):04X}⟩")
        else:
            out.append(char)
    out.append(_spaces(spaces))
    return "".join(out)


def _spaces(count: int) -> str:
    return " " * count if count < 2 else f"⟨{count} spaces⟩"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a cycle
        return repr(value)


def _wrap(line: str, indent: str) -> list[str]:
    parts = [line[i : i + LINE_WIDTH] for i in range(0, max(len(line), 1), LINE_WIDTH)]
    return [parts[0], *(f"{indent}↪ {part}" for part in parts[1:])]


def describe_call(request: ApprovalRequest) -> list[str]:
    """The call, whole, as lines to show: ``tool {arguments}`` when that fits one line
    and nothing in it needs making visible; else the tool, then one argument per line
    (``name: value``, a string value in quotes, as :func:`visible` shows it)."""
    arguments = thaw(request.arguments)
    compact = f"{request.tool_name} {_json(arguments)}"
    if len(compact) <= LINE_WIDTH and visible(compact) == compact:
        return [compact]
    lines = [visible(request.tool_name)]
    items = arguments.items() if isinstance(arguments, dict) else [("arguments", arguments)]
    for key, value in items:
        # a string in quotes (``"true"`` is not ``true``), its quotes escaped
        shown = (
            '"' + visible(value).replace('"', '\\"') + '"'
            if isinstance(value, str)
            else visible(_json(value))
        )
        lines += _wrap(f"  {visible(str(key))}: {shown}", "    ")
    return lines


def _string_arguments(request: ApprovalRequest) -> list[str]:
    arguments = thaw(request.arguments)
    if not isinstance(arguments, dict):
        return []
    return [key for key, value in arguments.items() if isinstance(value, str)]


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
            if request.question is not None:  # a running tool asks the person
                answers[request.tool_call_id] = await answer(
                    request.question, self.mode, self._say, self.read_line, visible
                )
                continue
            lines = describe_call(request)
            if self.mode != "ask":
                allow = self.mode == "yes"
                verdict = "allowed (--yes)" if allow else "refused (--no or no terminal)"
                call = "\n".join(lines)
                self._say(f"approval: {call} ({visible(request.reason)}): {verdict}\n")
                answers[request.tool_call_id] = Approval(allow, reason=f"the terminal: {verdict}")
                continue
            answers[request.tool_call_id] = await self._ask(request, lines)
        return answers

    async def _show(self, lines: list[str]) -> bool:
        """Show ``lines`` under ``approve``, a page at a time; ``False`` at end of input
        or when the person refuses before the end."""
        self._say("\napprove ")
        for start in range(0, len(lines), PAGE_LINES):
            if start:
                self._say(
                    f"  -- lines {start + 1}-{len(lines)} of {len(lines)} follow: "
                    "Enter for more, n to refuse --"
                )
                line = await self.read_line()
                if not line or line.strip().lower() in ("n", "no"):
                    return False
            page = lines[start : start + PAGE_LINES]
            last = start + PAGE_LINES >= len(lines)
            self._say("\n".join(page) + ("?\n" if last else "\n"))
        return True

    async def _ask(self, request: ApprovalRequest, lines: list[str]) -> Approval:
        if not await self._show(lines):
            return Approval(False, reason="refused at the terminal")
        scoped = _string_arguments(request)
        choices = "[y]es / [n]o / [a]lways these exact arguments"
        if scoped:
            choices += " / always a [p]refix or [g]lob of an argument"
        self._say(f"  {visible(request.reason)}\n")
        while True:
            self._say(f"  {choices}: ")
            line = await self.read_line()
            answer = line.strip().lower()
            if answer in ("y", "yes"):
                return Approval(True, reason="approved at the terminal")
            if answer in ("a", "always"):
                self._say(f"  remembering: {visible(request.tool_name)} (these exact arguments)\n")
                return Approval(True, reason="approved at the terminal (always)", remember="call")
            if scoped and answer in ("p", "prefix", "g", "glob"):
                approval = await self._scope(
                    request, scoped, "prefix" if answer[0] == "p" else "glob"
                )
                if approval is not None:
                    return approval
                continue
            if answer in ("n", "no", "") or not line:
                return Approval(False, reason="refused at the terminal")
            self._say(f"please answer {'y, n, a, p or g' if scoped else 'y, n or a'}\n")

    async def _scope(
        self, request: ApprovalRequest, names: list[str], kind: Literal["prefix", "glob"]
    ) -> Approval | None:
        """Ask which argument and what pattern; ``None`` to ask the question again."""
        argument = names[0]
        if len(names) > 1:
            self._say(f"  which argument ({', '.join(visible(n) for n in names)})? ")
            argument = (await self.read_line()).rstrip("\r\n")
            if argument not in names:
                self._say("  not a string argument of this call\n")
                return None
        what = "the start of its value" if kind == "prefix" else "a path glob: * ? [..] **"
        self._say(f"  {kind} of {visible(argument)} ({what}): ")
        pattern = (await self.read_line()).rstrip("\r\n")
        try:
            scope = ArgumentScope.of_call(kind, argument, pattern, thaw(request.arguments))
        except ValueError as error:
            self._say(f"  {error}\n")
            return None
        self._say(f"  remembering: {visible(request.tool_name)} ({visible(scope.describe())})\n")
        return Approval(
            True,
            reason=f"approved at the terminal ({kind} {pattern!r} of {argument})",
            remember=kind,
            argument=argument,
            pattern=pattern,
        )


def approval_mode(yes: bool, no: bool, interactive: bool) -> Mode:
    """The mode for ``--yes``/``--no`` and whether there is a terminal to ask."""
    if yes:
        return "yes"
    if no or not interactive:
        return "no"
    return "ask"
