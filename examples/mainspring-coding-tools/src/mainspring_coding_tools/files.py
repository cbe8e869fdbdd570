"""The file operations behind ``read``, ``write``, ``edit`` and ``ls``.

These are plain synchronous functions on paths that :meth:`Workspace.resolve` already
checked; the tools in :mod:`mainspring_coding_tools.tools` run them in a worker thread
(under ``ctx.file_lock`` where a file is written). Expected failures raise
:class:`~mainspring_coding_tools.workspace.ToolFailure` with the text the model sees.

Every file is opened relative to a descriptor of its directory
(:meth:`Workspace.place`), with ``O_NOFOLLOW``, so nothing swapped in after the path was
checked can redirect the open out of the workspace. Files are opened with
``O_NONBLOCK`` and must be regular files, so a FIFO cannot hang a call. A regular file
with more than one hard link may be another name of a file outside the workspace: ``read``
and ``edit`` refuse it unless the ``allow_hard_links`` option is set. ``write`` replaces
the *name* (a new file renamed over it), which leaves any other link untouched, so it
needs no such check.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from mainspring import ToolResult

from .deadline import Deadline
from .options import CodingToolsOptions
from .workspace import DIRECTORY_FLAGS, NotFound, ToolFailure, Workspace

__all__ = [
    "FILE_FLAGS",
    "SNIFF_BYTES",
    "changed",
    "cut_line",
    "edit_file",
    "list_directory",
    "open_directory",
    "open_regular",
    "read_file",
    "replace_atomically",
    "write_file",
]

SNIFF_BYTES = 8192
"""A file with a NUL byte in its first ``SNIFF_BYTES`` bytes is treated as binary."""

FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""Flags every file is opened with for reading."""


def cut_line(line: str, limit: int) -> str:
    """``line``, cut to ``limit`` characters with a note saying how long it was."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [line cut: {len(line)} characters]"


def changed(shown: str) -> ToolFailure:
    """The failure of an open that met a symlink the walk had not seen (a swap)."""
    return ToolFailure(
        f"{shown} changed while it was being opened (it is now a symlink); try again"
    )


def open_regular(
    options: CodingToolsOptions, dir_fd: int, name: str, shown: str
) -> tuple[int, os.stat_result]:
    """Open regular file ``name`` of ``dir_fd`` for reading: its descriptor and status.

    :class:`ToolFailure` for a missing file, a directory, anything not a regular file,
    and a file with several hard links (unless allowed).
    """
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ToolFailure(f"{shown}: no such file") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise changed(shown) from None
        raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolFailure(f"{shown} is a directory; use ls to list it")
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure(f"{shown} is not a regular file")
        if info.st_nlink > 1 and not options.allow_hard_links:
            raise ToolFailure(
                f"{shown} has {info.st_nlink} hard links; a file with several links may be "
                "another name of a file outside the workspace, so it is not opened"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _open_for_reading(
    workspace: Workspace, options: CodingToolsOptions, path: Path, shown: str
) -> tuple[int, os.stat_result]:
    try:
        with workspace.place(path) as placed:
            if placed.name is None:
                raise ToolFailure(f"{shown} is a directory; use ls to list it")
            return open_regular(options, placed.dir_fd, placed.name, shown)
    except NotFound:
        raise ToolFailure(f"{shown}: no such file") from None


def _is_binary(fd: int) -> bool:
    return b"\x00" in os.pread(fd, SNIFF_BYTES, 0)


def read_file(
    workspace: Workspace,
    options: CodingToolsOptions,
    path: Path,
    offset: int,
    limit: int | None,
    deadline: Deadline,
) -> ToolResult:
    """Lines ``offset``… of ``path``, numbered, within the line and character caps."""
    shown = workspace.display(path)
    fd, info = _open_for_reading(workspace, options, path, shown)
    with open(fd, encoding="utf-8", errors="replace", newline=None, closefd=True) as handle:
        if _is_binary(fd):
            raise ToolFailure(f"{shown} looks like a binary file ({info.st_size} bytes); not shown")
        wanted = options.read_max_lines if limit is None else limit
        budget = options.read_max_chars
        out: list[str] = []
        used = last_shown = total = 0
        cut_by_size = False
        for number, raw in enumerate(handle, start=1):
            deadline.check()
            total = number
            if number < offset or cut_by_size or number >= offset + wanted:
                continue
            line = f"{number:>6}\t{cut_line(raw.rstrip(chr(10)), options.max_line_chars)}"
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
    data = content.encode("utf-8")
    with workspace.place(path, create=True) as placed:
        if placed.name is None:
            raise ToolFailure(f"{shown} is a directory; give a file path")
        try:
            info: os.stat_result | None = os.stat(
                placed.name, dir_fd=placed.dir_fd, follow_symlinks=False
            )
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise ToolFailure(f"{shown} is a directory; give a file path")
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise changed(shown)
        keep_mode = stat.S_IMODE(info.st_mode) if info is not None else None
        replace_atomically(placed.dir_fd, placed.name, data, keep_mode)
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "Created" if info is None else "Overwrote"
    return ToolResult(
        f"{verb} {shown} ({len(data)} bytes, {lines} lines)",
        details={"path": shown, "bytes": len(data), "created": info is None},
    )


def replace_atomically(dir_fd: int, name: str, data: bytes, mode: int | None) -> None:
    """Write ``data`` to a new file beside ``name`` in ``dir_fd``, then rename it over
    ``name``: a reader sees the old content or the new, never half of it, and whatever was
    at ``name`` (another link, a symlink swapped in) is replaced, not written through.
    ``mode``: the permissions to keep; ``None`` gives a new file's (``0o666`` less umask).
    """
    temporary = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o666, dir_fd=dir_fd)
    try:
        with open(fd, "wb", closefd=True) as stream:
            stream.write(data)
            if mode is not None:
                os.fchmod(stream.fileno(), mode)
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
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


def edit_file(
    workspace: Workspace,
    options: CodingToolsOptions,
    path: Path,
    old_text: str,
    new_text: str,
) -> ToolResult:
    """Replace the one exact occurrence of ``old_text`` in ``path`` with ``new_text``."""
    shown = workspace.display(path)
    try:
        return _edit_placed(workspace, options, path, shown, old_text, new_text)
    except NotFound:
        raise ToolFailure(f"{shown}: no such file") from None


def _edit_placed(
    workspace: Workspace,
    options: CodingToolsOptions,
    path: Path,
    shown: str,
    old_text: str,
    new_text: str,
) -> ToolResult:
    with workspace.place(path) as placed:
        if placed.name is None:
            raise ToolFailure(f"{shown} is a directory; use ls to list it")
        fd, info = open_regular(options, placed.dir_fd, placed.name, shown)
        if not old_text:
            os.close(fd)
            raise ToolFailure("old_text is empty; to create or overwrite a file, use write")
        if old_text == new_text:
            os.close(fd)
            raise ToolFailure("old_text and new_text are the same; there is nothing to change")
        with open(fd, "rb", closefd=True) as stream:
            raw = stream.read()
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
                "must occur exactly once. Include more of the surrounding lines to make it "
                "unique."
            )
        index = found[0]
        updated = text[:index] + new_text + text[index + len(old_text) :]
        replace_atomically(
            placed.dir_fd, placed.name, updated.encode("utf-8"), stat.S_IMODE(info.st_mode)
        )
    line = _line_of(text, index)
    removed, added = old_text.count("\n") + 1, new_text.count("\n") + 1
    return ToolResult(
        f"Edited {shown}: replaced {removed} line(s) at line {line} with {added} line(s)",
        details={"path": shown, "line": line},
    )


def open_directory(dir_fd: int, name: str | None, shown: str) -> int:
    """A new descriptor of directory ``name`` of ``dir_fd`` (``None``: ``dir_fd`` itself)."""
    if name is None:
        return os.dup(dir_fd)
    try:
        return os.open(name, DIRECTORY_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ToolFailure(f"{shown}: no such directory") from None
    except NotADirectoryError:
        raise ToolFailure(f"{shown} is a file, not a directory; use read to see it") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise changed(shown) from None
        raise


def list_directory(
    workspace: Workspace, options: CodingToolsOptions, path: Path, deadline: Deadline
) -> ToolResult:
    """The entries of ``path``, sorted; directories (and links to them) end with ``/``."""
    shown = workspace.display(path)
    try:
        with workspace.place(path) as placed:
            fd = open_directory(placed.dir_fd, placed.name, shown)
    except NotFound:
        raise ToolFailure(f"{shown}: no such directory") from None
    try:
        names: list[str] = []
        with os.scandir(fd) as entries:
            for entry in entries:
                deadline.check()
                names.append(entry.name + ("/" if entry.is_dir() else ""))
    finally:
        os.close(fd)
    names.sort(key=lambda name: (name.casefold(), name))
    if not names:
        return ToolResult(f"{shown} is empty", details={"path": shown, "entries": 0})
    cap = options.ls_max_entries
    body = "\n".join(names[:cap])
    if len(names) > cap:
        body += f"\n[{len(names) - cap} more entries not shown; {len(names)} in all]"
    return ToolResult(body, details={"path": shown, "entries": len(names)})
