"""The workspace root every coding tool is confined to, and path resolution inside it.

A model-supplied path is handled like this:

1. Refused outright: an empty path, a NUL byte, a path longer than
   :data:`MAX_PATH_CHARS`, and a leading ``~`` (home-directory expansion would point
   outside the workspace; nothing here expands it).
2. An absolute path must lie inside the root (as resolved, or as configured); it is then
   taken relative to the root. A relative path is relative to the root.
3. The path is walked one component at a time from an open descriptor of the root: every
   directory is opened with ``O_NOFOLLOW`` relative to its parent's descriptor
   (``os.open(name, ..., dir_fd=parent)``), so no component can be redirected by a
   symlink swapped in between a check and an open. A symlink met on the way is read and
   its target walked the same way, inside the root; ``..`` goes back to the directory the
   walk came from. A ``..`` that climbs above the root, and a symlink whose target leaves
   it, are refused, each with its own message.

The tools open the final component relative to the descriptor of its directory, again
with ``O_NOFOLLOW`` (see :mod:`mainspring_coding_tools.files`), so what they read or write
is always inside the workspace, whatever another process does to it meanwhile. A symlink
inside the workspace that points inside it works (writing through one writes its target).
What is not covered: a directory that another process *moves* out of the workspace while a
call holds it open. Use OS-level isolation (a container, a separate user) when the
workspace itself is shared with something untrusted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["DIRECTORY_FLAGS", "MAX_PATH_CHARS", "NotFound", "Placement", "ToolFailure", "Workspace"]

MAX_PATH_CHARS: Final = 4096
"""The longest path a tool accepts (Linux's ``PATH_MAX``): it bounds the work of a walk."""

DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""Flags every directory of a walk is opened with."""

_MAX_SYMLINKS = 40
"""Symlinks one walk may follow (the kernel's own limit), so a cycle ends."""

_CHANGED: Final = frozenset({errno.ELOOP, errno.ENOTDIR, errno.ENOENT})
"""What opening a component that was just looked at fails with when it was swapped."""

_MAX_RETRIES = 8
"""Times one walk retries a component that changed between its ``lstat`` and its open."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class ToolFailure(Exception):
    """An expected failure of a tool call; its message is what the model is told."""


class NotFound(ToolFailure):
    """A directory on the way to the path does not exist."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a path lands: an open descriptor of its directory and its name in it.

    ``name`` is ``None`` when the path is that directory itself (``.``, the root, ``d/..``).
    ``parts`` are the path's components from the root, symlinks resolved. The descriptor
    belongs to the ``with`` block of :meth:`Workspace.place` that produced it.
    """

    dir_fd: int
    name: str | None
    parts: tuple[str, ...]


class _Walk:
    """One walk from the root (see the module docs); owns the descriptors it opens."""

    def __init__(self, workspace: Workspace, shown: str, create: bool) -> None:
        self.workspace = workspace
        self.shown = shown
        self.create = create
        self.fds: list[int] = [os.open(workspace.root, DIRECTORY_FLAGS)]
        self.names: list[str] = []
        self.missing: list[str] = []
        self.links = 0
        self.retries = 0

    def close(self, keep: int | None = None) -> None:
        for fd in self.fds:
            if fd != keep:
                os.close(fd)
        self.fds.clear()

    def _climb(self, link: str | None) -> None:
        if self.missing:
            self.missing.pop()
        elif self.names:
            os.close(self.fds.pop())
            self.names.pop()
        elif link is None:
            raise ToolFailure(
                f"{self.shown!r} climbs out of the workspace with '..'; paths must stay "
                f"inside {self.workspace.root}"
            )
        else:
            raise self.workspace.link_out(self.shown, link)

    def _follow(self, name: str, pending: deque[tuple[str, str | None]]) -> None:
        self.links += 1
        if self.links > _MAX_SYMLINKS:
            raise ToolFailure(f"{self.shown!r}: too many levels of symbolic links")
        target = os.readlink(name, dir_fd=self.fds[-1])
        if os.path.isabs(target):
            relative = self.workspace.relative_parts(os.path.normpath(target))
            if relative is None:
                raise self.workspace.link_out(self.shown, target)
            for fd in self.fds[1:]:
                os.close(fd)
            del self.fds[1:]
            self.names.clear()
            parts = list(relative)
        else:
            parts = target.split("/")
        pending.extendleft(reversed([(part, target) for part in parts]))

    def _enter(self, name: str, link: str | None, pending: deque[tuple[str, str | None]]) -> None:
        try:
            fd = os.open(name, DIRECTORY_FLAGS, dir_fd=self.fds[-1])
        except OSError as error:
            if error.errno not in _CHANGED:
                raise
            # it changed since it was looked at (a swap): look again, a bounded number of times
            self.retries += 1
            if self.retries > _MAX_RETRIES:
                raise ToolFailure(
                    f"{self.shown!r} kept changing while it was being opened; try again"
                ) from error
            pending.appendleft((name, link))
            return
        self.fds.append(fd)
        self.names.append(name)

    def run(self, parts: tuple[str, ...], lenient: bool) -> tuple[str | None, tuple[str, ...]]:
        """Walk ``parts``; the final name (``None`` for a directory) and the real parts.

        ``lenient``: a missing directory keeps the rest of the path as written (for
        :meth:`Workspace.resolve`); otherwise it raises :class:`NotFound`, or is created
        when the walk was made with ``create``.
        """
        pending: deque[tuple[str, str | None]] = deque((part, None) for part in parts)
        while pending:
            name, link = pending.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                self._climb(link)
                continue
            if self.missing:
                self.missing.append(name)
                continue
            last = not pending
            try:
                info = os.stat(name, dir_fd=self.fds[-1], follow_symlinks=False)
            except FileNotFoundError:
                if self.create and not last:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=self.fds[-1])
                    pending.appendleft((name, link))
                    continue
                if not last and not lenient:
                    raise NotFound(f"{self.shown}: no such file or directory") from None
                self.missing.append(name)
                continue
            if stat.S_ISLNK(info.st_mode):
                self._follow(name, pending)
            elif last:
                return name, (*self.names, name)
            elif stat.S_ISDIR(info.st_mode):
                self._enter(name, link, pending)
            elif lenient:
                self.missing.append(name)
            else:
                where = "/".join((*self.names, name))
                raise ToolFailure(f"{self.shown}: {where} is not a directory")
        if self.missing:
            return self.missing[-1], (*self.names, *self.missing)
        return None, tuple(self.names)


class Workspace:
    """A directory every tool call resolves its paths inside.

    ``root`` must be an existing directory; it is stored resolved (symlinks followed),
    so every containment check compares real paths.
    """

    __slots__ = ("_given", "root")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        resolved = Path(os.path.realpath(os.fspath(root)))
        if not resolved.is_dir():
            raise ValueError(f"the workspace {os.fspath(root)!r} is not an existing directory")
        self.root: Final[Path] = resolved
        self._given = os.path.normpath(os.path.abspath(os.fspath(root)))

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` (already absolute and normalised) is the root or inside it."""
        return _inside(os.fspath(path), os.fspath(self.root))

    def relative_parts(self, absolute: str) -> tuple[str, ...] | None:
        """The components of normalised ``absolute`` below the root (as resolved or as
        given), or ``None`` when it is outside."""
        for base in (os.fspath(self.root), self._given):
            if _inside(absolute, base):
                rest = absolute[len(base) :].strip(os.sep)
                return tuple(rest.split(os.sep)) if rest else ()
        return None

    def link_out(self, shown: str, target: str) -> ToolFailure:
        """The refusal of a path that goes through a symlink leaving the workspace."""
        return ToolFailure(
            f"{shown!r} goes through a symlink that points outside the workspace "
            f"(to {target}); refused"
        )

    def _model_parts(self, path: str) -> tuple[str, ...]:
        if not path:
            raise ToolFailure("the path is empty; give a path relative to the workspace root")
        if "\x00" in path:
            raise ToolFailure("the path contains a NUL byte")
        if len(path) > MAX_PATH_CHARS:
            raise ToolFailure(
                f"the path is {len(path)} characters long; the limit is {MAX_PATH_CHARS}"
            )
        if path.startswith("~"):
            raise ToolFailure(
                f"{path!r}: '~' is not expanded and the home directory is outside the "
                "workspace; give a path relative to the workspace root"
            )
        if not os.path.isabs(path):
            return tuple(path.split("/"))
        relative = self.relative_parts(os.path.normpath(path))
        if relative is None:
            raise ToolFailure(
                f"{path!r} is outside the workspace ({self.root}); use a path inside it"
            )
        return relative

    def resolve(self, path: str) -> Path:
        """The real path ``path`` names inside the workspace (a missing tail kept as
        written); :class:`ToolFailure` if it is refused (see the module docs)."""
        walk = _Walk(self, path, create=False)
        try:
            _, parts = walk.run(self._model_parts(path), lenient=True)
        finally:
            walk.close()
        return self.root.joinpath(*parts)

    @contextlib.contextmanager
    def place(self, path: Path, *, create: bool = False) -> Iterator[Placement]:
        """Walk ``path`` (a result of :meth:`resolve`) again from the root, without
        following any symlink the walk does not check, and yield where it lands.

        ``create`` makes missing directories on the way (for ``write``); otherwise a
        missing one raises :class:`NotFound`. The final component may not exist.
        """
        shown = self.display(path)
        parts = self.relative_parts(os.fspath(path))
        if parts is None:
            raise ToolFailure(f"{shown!r} is outside the workspace ({self.root})")
        walk = _Walk(self, shown, create=create)
        try:
            name, real = walk.run(parts, lenient=False)
            placement = Placement(walk.fds[-1], name, real)
        except BaseException:
            walk.close()
            raise
        walk.close(keep=placement.dir_fd)
        try:
            yield placement
        finally:
            os.close(placement.dir_fd)

    def display(self, path: Path) -> str:
        """``path`` as the model should see it: relative to the root, ``/``-separated."""
        if path == self.root:
            return "."
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"
