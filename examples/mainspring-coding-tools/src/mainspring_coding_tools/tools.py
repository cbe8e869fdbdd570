"""The six tools, built for one workspace: `read`, `write`, `edit`, `ls`, `grep`,
`bash`.

:func:`build_tools` returns fresh :class:`~mainspring.Tool` objects bound to a workspace
and options, so each agent gets tools for its own root (the plugin calls it from
`register_tools`; an embedder may call it directly and pass `Agent(tools=...)`).

Concurrency (`sequential`):

- `read`, `ls` and `grep` only read, and `write`/`edit` serialise themselves per
  file with `ctx.file_lock(path)`, so they run concurrently (`sequential=False`): a
  batch of edits to different files, or several edits to one file, is safe, and no edit
  is lost. `read` takes the same lock, so within one batch the calls touching one file
  take effect in call order (a `read` after a `write` of that file sees the new text).
  Writes are atomic (a temporary file renamed over the target), so nothing ever sees half
  a file.
- `bash` is `sequential=True`: a command can touch any file without the locks, and a
  model that writes `[edit(a.py), bash("pytest")]` in one turn means "then". Any batch
  containing `bash` therefore runs one call at a time, in call order.

Deadlines: each file tool call runs under a
:class:`~mainspring_coding_tools.deadline.Deadline` of `file_timeout_s` that its worker
thread checks as it goes (per line, entry or file), so it stops itself; the tool's own
`timeout_s` (the kernel's bound) is set a little later as a backstop. Only the path is
resolved on the event loop, before the file lock is taken (so calls on one file take the
lock in call order): a walk of at most `MAX_PATH_CHARS` characters and 40 symlinks.

Failures the model can act on (a refused path, no match, a bad regex, a missing file) are
returned as error results with a plain message; anything unexpected raises, and the
kernel reports it as `Tool "x" failed: ...`.
"""

# No `from __future__ import annotations` here: `@tool` reads the parameter annotations,
# and the `bash` timeout bound refers to a local variable, which a string annotation
# could not resolve.
import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

from pydantic import Field

from mainspring import Tool, ToolContext, ToolResult, tool
from mainspring.effects import Role
from mainspring.providers.keys import guard_process_memory

from .deadline import Deadline
from .environment import command_environment
from .files import edit_file, list_directory, read_file, write_file
from .options import CodingToolsOptions
from .sandbox import hidden_directories, sandbox_command
from .search import grep_files
from .shell import run_command
from .workspace import ToolFailure, Workspace

__all__ = ["TOOL_NAMES", "build_tools"]

TOOL_NAMES: tuple[str, ...] = ("read", "write", "edit", "ls", "grep", "bash")
"""The names of the tools :func:`build_tools` returns, in that order."""

_BACKSTOP_S = 5.0
"""How much later than `file_timeout_s` the kernel's own timeout of a file tool fires."""


async def _guarded(workspace: Workspace, action: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
    """Run `action`; expected failures become error results the model can act on."""
    try:
        return await action()
    except ToolFailure as failure:
        return ToolResult.error(str(failure))
    except OSError as error:
        where = ""
        if error.filename is not None:
            where = f" ({workspace.display(Path(os.fsdecode(error.filename)))})"
        return ToolResult.error(f"{error.strerror or type(error).__name__}{where}")


def build_tools(
    workspace: Workspace | str | os.PathLike[str], options: CodingToolsOptions | None = None
) -> list[Tool]:
    """The coding tools, rooted in `workspace` (an existing directory).

    Raises `ValueError` if `workspace` is not an existing directory, or if the
    `bash_sandbox` option requires namespaces the system does not allow. Building them
    clears the process's dumpable flag (`guard_process_memory`): `bash` commands run as
    the same user then cannot read the agent's memory or initial environment.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    opts = options or CodingToolsOptions()
    sandbox = sandbox_command(opts.bash_sandbox)
    guard_process_memory()
    backstop_s = opts.file_timeout_s + _BACKSTOP_S

    def deadline(what: str, ctx: ToolContext | None = None) -> Deadline:
        aborted = (lambda: ctx.signal.aborted) if ctx is not None else (lambda: False)
        return Deadline(opts.file_timeout_s, what, aborted)

    @tool(name="read", timeout_s=backstop_s, effects=("read",))
    async def read(
        ctx: ToolContext,
        path: Annotated[str, Role("path")],
        offset: Annotated[int, Field(ge=1)] = 1,
        limit: Annotated[int, Field(ge=1)] | None = None,
    ) -> ToolResult:
        """Read a text file of the workspace, with line numbers (`number<TAB>text`).

        Long files are shown in parts: the output says which lines it shows and the offset
        to continue with. Binary files are refused.

        Args:
            path: The file, relative to the workspace root.
            offset: The first line to show (1-based).
            limit: How many lines to show at most.
        """

        async def action() -> ToolResult:
            limit_ = deadline("read", ctx)
            target = ws.resolve(path)
            async with ctx.file_lock(str(target)):
                return await asyncio.to_thread(read_file, ws, opts, target, offset, limit, limit_)

        return await _guarded(ws, action)

    @tool(name="write", timeout_s=backstop_s, effects=("write",))
    async def write(
        ctx: ToolContext,
        path: Annotated[str, Role("path")],
        content: Annotated[str, Role("content")],
    ) -> ToolResult:
        """Create or overwrite a file with the given content.

        Missing parent directories are created. The file is replaced atomically.

        Args:
            path: The file, relative to the workspace root.
            content: The complete new content of the file.
        """

        async def action() -> ToolResult:
            target = ws.resolve(path)
            async with ctx.file_lock(str(target)):
                return await asyncio.to_thread(write_file, ws, target, content)

        return await _guarded(ws, action)

    @tool(name="edit", timeout_s=backstop_s, effects=("read", "write"))
    async def edit(
        ctx: ToolContext,
        path: Annotated[str, Role("path")],
        old_text: str,
        new_text: Annotated[str, Role("content")],
    ) -> ToolResult:
        """Replace one exact piece of text in a file.

        `old_text` must occur exactly once in the file, matching it character for
        character (whitespace and indentation included); otherwise nothing is changed and
        the error says whether it was not found or where its several occurrences are.

        Args:
            path: The file, relative to the workspace root.
            old_text: The exact text to replace; include enough lines to make it unique.
            new_text: The text to put in its place.
        """

        async def action() -> ToolResult:
            target = ws.resolve(path)
            async with ctx.file_lock(str(target)):
                return await asyncio.to_thread(edit_file, ws, opts, target, old_text, new_text)

        return await _guarded(ws, action)

    @tool(name="ls", timeout_s=backstop_s, effects=("read",))
    async def ls(ctx: ToolContext, path: Annotated[str, Role("path")] = ".") -> ToolResult:
        """List a directory of the workspace, sorted; directories end with `/`.

        Args:
            path: The directory, relative to the workspace root.
        """

        async def action() -> ToolResult:
            limit_ = deadline("ls", ctx)
            target = ws.resolve(path)
            return await asyncio.to_thread(list_directory, ws, opts, target, limit_)

        return await _guarded(ws, action)

    @tool(name="grep", timeout_s=backstop_s, effects=("read",))
    async def grep(
        ctx: ToolContext,
        pattern: str,
        path: Annotated[str, Role("path")] = ".",
        glob: str | None = None,
        ignore_case: bool = False,
    ) -> ToolResult:
        """Search files for lines matching a regular expression (RE2 syntax).

        Prints `path:line: text` for each matching line, up to a result limit. Binary
        and very large files, and directories such as `.git`, `.venv` and
        `node_modules`, are skipped. RE2 is Python regex syntax without backreferences,
        lookahead/lookbehind, atomic groups and possessive quantifiers.

        Args:
            pattern: The regular expression to search for (RE2 syntax).
            path: A directory to search recursively, or one file; relative to the root.
            glob: Only files matching this pattern, e.g. `*.py` (matched against the
                file name), or `src/*.py` (against the path from the root).
            ignore_case: Match regardless of case.
        """

        async def action() -> ToolResult:
            limit_ = deadline("grep", ctx)
            target = ws.resolve(path)
            return await asyncio.to_thread(
                grep_files, ws, opts, target, pattern, glob, ignore_case, limit_
            )

        return await _guarded(ws, action)

    @tool(
        name="bash",
        sequential=True,
        effects=("execute",),
        description=(
            "Run a shell command in the workspace root (its working directory) and return "
            "its combined stdout and stderr and its exit code. Standard input is empty, so "
            "nothing interactive works, and the environment holds only basic variables "
            "(PATH, HOME, LANG...); HOME is a scratch directory, not the user's home. "
            "Background processes do not outlive the call. The command is killed, with "
            "every process it started, "
            f"after {opts.bash_timeout_s:g} s unless a timeout is given (at most "
            f"{opts.bash_max_timeout_s:g} s); output beyond {opts.bash_max_output_chars} "
            "characters is cut in the middle."
        ),
    )
    async def bash(
        ctx: ToolContext,
        command: Annotated[str, Role("command")],
        timeout_s: Annotated[float, Field(gt=0, le=opts.bash_max_timeout_s)] | None = None,
    ) -> ToolResult:
        """Run a shell command.

        Args:
            command: The command line, run with `bash -c`.
            timeout_s: Seconds before the command is killed.
        """
        return await run_command(
            command,
            cwd=str(ws.root),
            shell=opts.shell_path(),
            env=command_environment(os.environ, opts.bash_env_passthrough),
            sandbox=sandbox,
            hidden=hidden_directories(ws.root) if sandbox else (),
            timeout_s=opts.bash_timeout_s if timeout_s is None else timeout_s,
            max_output_chars=opts.bash_max_output_chars,
            ctx=ctx,
        )

    return [read, write, edit, ls, grep, bash]
