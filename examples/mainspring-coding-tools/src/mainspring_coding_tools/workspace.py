"""The workspace root every coding tool is confined to, and path resolution inside it.

A model-supplied path is resolved like this:

1. Refused outright: an empty path, a NUL byte, and a leading ``~`` (home-directory
   expansion would point outside the workspace; nothing here expands it).
2. A relative path is taken relative to the root; an absolute path is kept as given.
3. The result is resolved with :func:`os.path.realpath`, which follows every symlink
   that exists (a path that does not exist yet keeps its missing tail as written).
4. The resolved path must be the root or inside it. ``..`` that climbs out, an absolute
   path elsewhere, and a symlink (anywhere along the path) that points out are all
   refused, each with its own message.

The check is done on the resolved path, and the tools then open the *resolved* path, so a
symlink inside the workspace that points inside it works, and writing through one writes
its target. What is not covered: a process outside the agent swapping a directory for a
symlink between the check and the open (a TOCTOU race). Use OS-level isolation (a
container, a separate user) when the workspace itself is untrusted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["ToolFailure", "Workspace"]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class ToolFailure(Exception):
    """An expected failure of a tool call; its message is what the model is told."""


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

    def _lexically_inside(self, path: str) -> bool:
        """Inside the root as resolved, or as it was given (which may contain symlinks)."""
        return self.contains(path) or _inside(path, self._given)

    def resolve(self, path: str) -> Path:
        """The real path ``path`` names inside the workspace; :class:`ToolFailure` if it
        is refused (see the module docs for the rules)."""
        if not path:
            raise ToolFailure("the path is empty; give a path relative to the workspace root")
        if "\x00" in path:
            raise ToolFailure("the path contains a NUL byte")
        if path.startswith("~"):
            raise ToolFailure(
                f"{path!r}: '~' is not expanded and the home directory is outside the "
                "workspace; give a path relative to the workspace root"
            )
        given = Path(path)
        joined = given if given.is_absolute() else self.root / given
        real = Path(os.path.realpath(joined))
        if self.contains(real):
            return real
        lexical = os.path.normpath(joined)
        if given.is_absolute() and not self._lexically_inside(lexical):
            raise ToolFailure(
                f"{path!r} is outside the workspace ({self.root}); use a path inside it"
            )
        if not given.is_absolute() and not self.contains(lexical):
            raise ToolFailure(
                f"{path!r} climbs out of the workspace with '..'; paths must stay inside "
                f"{self.root}"
            )
        raise ToolFailure(
            f"{path!r} goes through a symlink that points outside the workspace "
            f"(to {real}); refused"
        )

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
