"""``grep``: lines matching a model-chosen pattern, in linear time, inside the workspace.

- The pattern is RE2 syntax (:mod:`mainspring_coding_tools.patterns`): matching a line
  takes time linear in its length whatever the pattern, and releases the interpreter lock,
  so a hostile pattern cannot freeze the process.
- The tree is walked with directory descriptors (each directory opened with
  ``O_NOFOLLOW`` relative to its parent), in sorted path order. Symlinked directories are
  not entered; a symlinked file is searched when its target, walked inside the workspace,
  is a regular file there. Directories in :data:`SKIPPED_DIRECTORIES` are skipped (pass
  one as ``path`` to search it), and so are binary files, files over
  ``grep_max_file_bytes``, and files with several hard links (unless
  ``allow_hard_links``): the output counts those.
- The call's :class:`~mainspring_coding_tools.deadline.Deadline` is checked per file and
  per line.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from mainspring import ToolResult

from .deadline import Deadline
from .files import FILE_FLAGS, SNIFF_BYTES, cut_line, open_directory, open_regular
from .options import CodingToolsOptions
from .patterns import compile_glob, compile_pattern
from .workspace import DIRECTORY_FLAGS, NotFound, Placement, ToolFailure, Workspace

__all__ = ["SKIPPED_DIRECTORIES", "grep_files"]

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

_MAX_DEPTH = 64
"""Directories nested deeper than this below the search root are not entered."""


def _entries(
    dir_fd: int, parts: tuple[str, ...], deadline: Deadline
) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """``(directory descriptor, name, parts)`` of every non-directory under ``dir_fd``,
    in sorted path order; the descriptor is valid until the next item is asked for."""
    stack: list[tuple[int, Iterator[str], tuple[str, ...]]] = [
        (dir_fd, iter(sorted(os.listdir(dir_fd))), parts)
    ]
    try:
        while stack:
            fd, names, where = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(stack.pop()[0])
                continue
            deadline.check()
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                yield fd, name, (*where, name)
            elif name not in SKIPPED_DIRECTORIES and len(stack) <= _MAX_DEPTH:
                try:
                    child = os.open(name, DIRECTORY_FLAGS, dir_fd=fd)
                    listing = sorted(os.listdir(child))
                except OSError:
                    continue  # swapped or unreadable: skipped
                stack.append((child, iter(listing), (*where, name)))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


class _Search:
    """The state of one ``grep`` call."""

    def __init__(
        self,
        workspace: Workspace,
        options: CodingToolsOptions,
        matches: Callable[[bytes], bool],
        deadline: Deadline,
    ) -> None:
        self.workspace = workspace
        self.options = options
        self.matches = matches
        self.deadline = deadline
        self.hits: list[str] = []
        self.files_with_hits = 0
        self.hard_linked = 0

    @property
    def room(self) -> int:
        return self.options.grep_max_results - len(self.hits)

    def search_file(self, fd: int, info: os.stat_result, shown: str) -> None:
        """Search the open regular file ``fd`` (closing it)."""
        with open(fd, "rb", closefd=True) as handle:
            if info.st_size > self.options.grep_max_file_bytes:
                return
            if b"\x00" in os.pread(fd, SNIFF_BYTES, 0):
                return
            found = 0
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            for number, raw in enumerate(handle, start=1):
                self.deadline.check()
                line = raw.rstrip(b"\r\n")
                if not self.matches(line):
                    continue
                text = decoder.decode(line, final=True)
                self.hits.append(f"{shown}:{number}: {cut_line(text, self.options.max_line_chars)}")
                found += 1
                if self.room <= 0:
                    break
            self.files_with_hits += found > 0

    def open_entry(
        self, dir_fd: int, name: str, parts: tuple[str, ...]
    ) -> tuple[int, os.stat_result] | None:
        """Open a file met in the walk; a symlink is walked inside the workspace. ``None``
        when it is skipped (not a regular file, out of the workspace, swapped)."""
        shown = "/".join(parts)
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                with self.workspace.place(self.workspace.root.joinpath(*parts)) as placed:
                    if placed.name is None:
                        return None
                    return self._open(placed.dir_fd, placed.name, shown)
            return self._open(dir_fd, name, shown)
        except (ToolFailure, OSError):
            return None

    def _open(self, dir_fd: int, name: str, shown: str) -> tuple[int, os.stat_result] | None:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        if info.st_nlink > 1 and not self.options.allow_hard_links:
            os.close(fd)
            self.hard_linked += 1
            return None
        return fd, info


def grep_files(
    workspace: Workspace,
    options: CodingToolsOptions,
    start: Path,
    pattern: str,
    glob: str | None,
    ignore_case: bool,
    deadline: Deadline,
) -> ToolResult:
    """Lines matching ``pattern`` under ``start``, as ``path:line: text``."""
    where = workspace.display(start)
    search = _Search(workspace, options, compile_pattern(pattern, ignore_case), deadline)
    wanted = compile_glob(glob) if glob is not None else None
    missing = ToolFailure(f"{where}: no such file or directory")
    try:
        with workspace.place(start) as placed:
            kind = _kind(placed)
            if kind is None:
                raise missing
            top = open_directory(placed.dir_fd, placed.name, where) if kind == "dir" else None
            if top is None and (wanted is None or wanted(where)):
                assert placed.name is not None
                search.search_file(*open_regular(options, placed.dir_fd, placed.name, where), where)
    except NotFound:
        raise missing from None
    if top is not None:
        base = () if start == workspace.root else tuple(Path(where).parts)
        for dir_fd, name, parts in _entries(top, base, deadline):
            if wanted is not None and not wanted("/".join(parts)):
                continue
            opened = search.open_entry(dir_fd, name, parts)
            if opened is not None:
                search.search_file(*opened, "/".join(parts))
            if search.room <= 0:
                break
    return _report(search, pattern, where)


def _kind(placed: Placement) -> str | None:
    """``"dir"``, ``"file"`` (anything else), or ``None`` when nothing is there."""
    if placed.name is None:
        return "dir"
    try:
        info = os.stat(placed.name, dir_fd=placed.dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return "dir" if stat.S_ISDIR(info.st_mode) else "file"


def _report(search: _Search, pattern: str, where: str) -> ToolResult:
    skipped = ""
    if search.hard_linked:
        skipped = (
            f"\n[{search.hard_linked} file(s) with several hard links skipped: such a file may "
            "be another name of a file outside the workspace]"
        )
    details = {"matches": len(search.hits), "files": search.files_with_hits}
    if not search.hits:
        return ToolResult(f"No matches for {pattern!r} in {where}{skipped}", details=details)
    body = "\n".join(search.hits)
    capped = search.room <= 0
    if capped:
        cap = search.options.grep_max_results
        body += f"\n[stopped at {cap} matches; narrow the pattern, the path or the glob]"
    return ToolResult(body + skipped, details={**details, "capped": capped})
