"""The file operations behind ``read``, ``write``, ``edit``, ``ls`` and ``grep``.

These are plain synchronous functions on paths that :meth:`Workspace.resolve` already
checked; the tools in :mod:`mainspring_coding_tools.tools` run them in a worker thread
(under ``ctx.file_lock`` where a file is written). Expected failures raise
:class:`~mainspring_coding_tools.workspace.ToolFailure` with the text the model sees.
"""

from __future__ import annotations

import codecs
import contextlib
import fnmatch
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from mainspring import ToolResult

from .options import CodingToolsOptions
from .workspace import ToolFailure, Workspace

__all__ = [
    "SKIPPED_DIRECTORIES",
    "edit_file",
    "grep_files",
    "list_directory",
    "read_file",
    "write_file",
]

SKIPPED_DIRECTORIES: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
"""Directories ``grep`` does not descend into (pass one as ``path`` to search it)."""

_SNIFF_BYTES = 8192


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\x00" in handle.read(_SNIFF_BYTES)


def _cut_line(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [line cut: {len(line)} characters]"


def _check_file(workspace: Workspace, path: Path) -> None:
    shown = workspace.display(path)
    if not path.exists():
        raise ToolFailure(f"{shown}: no such file")
    if path.is_dir():
        raise ToolFailure(f"{shown} is a directory; use ls to list it")
    if not path.is_file():
        raise ToolFailure(f"{shown} is not a regular file")


def read_file(
    workspace: Workspace,
    options: CodingToolsOptions,
    path: Path,
    offset: int,
    limit: int | None,
) -> ToolResult:
    """Lines ``offset``… of ``path``, numbered, within the line and character caps."""
    _check_file(workspace, path)
    shown = workspace.display(path)
    if _is_binary(path):
        size = path.stat().st_size
        raise ToolFailure(f"{shown} looks like a binary file ({size} bytes); not shown")
    wanted = options.read_max_lines if limit is None else limit
    budget = options.read_max_chars
    out: list[str] = []
    used = 0
    last_shown = 0
    total = 0
    cut_by_size = False
    with path.open("r", encoding="utf-8", errors="replace", newline=None) as handle:
        for number, raw in enumerate(handle, start=1):
            total = number
            if number < offset or cut_by_size or number >= offset + wanted:
                continue
            text = _cut_line(raw.rstrip("\n"), options.max_line_chars)
            line = f"{number:>6}\t{text}"
            if out and used + len(line) + 1 > budget:
                cut_by_size = True
                continue
            out.append(line)
            used += len(line) + 1
            last_shown = number
    if total == 0:
        return ToolResult(f"{shown} is empty", details={"path": shown, "lines": 0})
    if offset > total:
        raise ToolFailure(f"offset {offset} is past the end of {shown}, which has {total} lines")
    body = "\n".join(out)
    if last_shown < total:
        reason = "the output size limit" if cut_by_size else "the line limit"
        body += (
            f"\n[showing lines {offset}-{last_shown} of {total} ({reason}); "
            f"continue with offset={last_shown + 1}]"
        )
    details = {"path": shown, "lines": total, "first": offset, "last": last_shown}
    return ToolResult(body, details=details)


def write_file(workspace: Workspace, path: Path, content: str) -> ToolResult:
    """Write ``content`` to ``path`` atomically, creating parent directories."""
    shown = workspace.display(path)
    if path.is_dir():
        raise ToolFailure(f"{shown} is a directory; give a file path")
    existed = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    _replace_atomically(path, data)
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "Overwrote" if existed else "Created"
    return ToolResult(
        f"{verb} {shown} ({len(data)} bytes, {lines} lines)",
        details={"path": shown, "bytes": len(data), "created": not existed},
    )


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``:
    a concurrent reader sees the old content or the new, never half of it."""
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        if mode is not None:
            os.chmod(temporary, mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _occurrences(text: str, needle: str) -> list[int]:
    found: list[int] = []
    start = text.find(needle)
    while start != -1:
        found.append(start)
        start = text.find(needle, start + len(needle))
    return found


def edit_file(workspace: Workspace, path: Path, old_text: str, new_text: str) -> ToolResult:
    """Replace the one exact occurrence of ``old_text`` in ``path`` with ``new_text``."""
    _check_file(workspace, path)
    shown = workspace.display(path)
    if not old_text:
        raise ToolFailure("old_text is empty; to create or overwrite a file, use write")
    if old_text == new_text:
        raise ToolFailure("old_text and new_text are the same; there is nothing to change")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolFailure(f"{shown} is not UTF-8 text ({error.reason}); not edited") from None
    found = _occurrences(text, old_text)
    if not found:
        hint = ""
        if "\r\n" in text and "\r\n" not in old_text and "\n" in old_text:
            hint = " The file has Windows (CRLF) line endings; old_text has LF only."
        raise ToolFailure(
            f"old_text was not found in {shown}. It must match the file exactly, including "
            f"whitespace and indentation; read the file and copy the text.{hint}"
        )
    if len(found) > 1:
        lines = ", ".join(str(_line_of(text, index)) for index in found[:20])
        more = f" (and {len(found) - 20} more)" if len(found) > 20 else ""
        raise ToolFailure(
            f"old_text occurs {len(found)} times in {shown} (at lines {lines}{more}); it "
            "must occur exactly once. Include more of the surrounding lines to make it unique."
        )
    index = found[0]
    updated = text[:index] + new_text + text[index + len(old_text) :]
    _replace_atomically(path, updated.encode("utf-8"))
    line = _line_of(text, index)
    removed, added = old_text.count("\n") + 1, new_text.count("\n") + 1
    return ToolResult(
        f"Edited {shown}: replaced {removed} line(s) at line {line} with {added} line(s)",
        details={"path": shown, "line": line},
    )


def list_directory(workspace: Workspace, options: CodingToolsOptions, path: Path) -> ToolResult:
    """The entries of ``path``, sorted; directories (and links to them) end with ``/``."""
    shown = workspace.display(path)
    if not path.exists():
        raise ToolFailure(f"{shown}: no such directory")
    if not path.is_dir():
        raise ToolFailure(f"{shown} is a file, not a directory; use read to see it")
    with os.scandir(path) as entries:
        names = sorted(
            (entry.name + ("/" if entry.is_dir() else "") for entry in entries),
            key=lambda name: (name.casefold(), name),
        )
    if not names:
        return ToolResult(f"{shown} is empty", details={"path": shown, "entries": 0})
    cap = options.ls_max_entries
    body = "\n".join(names[:cap])
    if len(names) > cap:
        body += f"\n[{len(names) - cap} more entries not shown; {len(names)} in all]"
    return ToolResult(body, details={"path": shown, "entries": len(names)})


def _glob_matches(glob: str, relative: str) -> bool:
    if "/" in glob:
        return fnmatch.fnmatchcase(relative, glob)
    return fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], glob)


def _walk(start: Path) -> list[Path]:
    """The files under ``start`` (or ``start`` itself), sorted by path; directories in
    :data:`SKIPPED_DIRECTORIES` and symlinked directories are not entered."""
    if start.is_file():
        return [start]
    found: list[Path] = []
    for directory, subdirectories, files in os.walk(start):
        subdirectories[:] = [name for name in subdirectories if name not in SKIPPED_DIRECTORIES]
        found.extend(Path(directory, name) for name in files)
    found.sort(key=lambda path: path.parts)
    return found


def grep_files(
    workspace: Workspace,
    options: CodingToolsOptions,
    start: Path,
    pattern: str,
    glob: str | None,
    ignore_case: bool,
    aborted: Callable[[], bool],
) -> ToolResult:
    """Lines matching ``pattern`` under ``start``, as ``path:line: text``."""
    if not start.exists():
        raise ToolFailure(f"{workspace.display(start)}: no such file or directory")
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as error:
        raise ToolFailure(f"invalid regular expression {pattern!r}: {error}") from None
    cap = options.grep_max_results
    hits: list[str] = []
    files_with_hits = 0
    capped = False
    for file in _walk(start):
        if aborted():
            raise ToolFailure("grep was aborted")
        relative = workspace.display(file)
        if glob is not None and not _glob_matches(glob, relative):
            continue
        real = Path(os.path.realpath(file))
        if not workspace.contains(real) or not real.is_file():
            continue  # a symlink out of the workspace, or to something odd: skipped
        try:
            if real.stat().st_size > options.grep_max_file_bytes or _is_binary(real):
                continue
            matched = _grep_one(real, regex, relative, options.max_line_chars, cap - len(hits))
        except OSError:
            continue
        if matched:
            files_with_hits += 1
            hits.extend(matched)
        if len(hits) >= cap:
            capped = True
            break
    where = workspace.display(start)
    if not hits:
        return ToolResult(
            f"No matches for {pattern!r} in {where}",
            details={"matches": 0, "files": 0},
        )
    body = "\n".join(hits)
    if capped:
        body += f"\n[stopped at {cap} matches; narrow the pattern, the path or the glob]"
    return ToolResult(
        body, details={"matches": len(hits), "files": files_with_hits, "capped": capped}
    )


def _grep_one(
    path: Path, regex: re.Pattern[str], shown: str, line_cap: int, room: int
) -> list[str]:
    found: list[str] = []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = decoder.decode(raw).rstrip("\r\n")
            if regex.search(line):
                found.append(f"{shown}:{number}: {_cut_line(line, line_cap)}")
                if len(found) >= room:
                    break
    return found
