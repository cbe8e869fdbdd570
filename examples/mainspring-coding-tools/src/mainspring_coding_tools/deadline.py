"""A time limit shared by one file tool call and the worker thread doing its work.

The kernel's ``Tool.timeout_s`` ends the *await* of a call, but a worker thread cannot be
interrupted: it would go on reading a large tree after the model was told the call timed
out. So the file operations check a :class:`Deadline` as they go (per line, per entry,
per file) and stop themselves with a :class:`ToolFailure`; the kernel's timeout, set a
little later, only backs it up. The same check notices an aborted run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .workspace import ToolFailure

__all__ = ["Deadline"]


class Deadline:
    """``seconds`` from now; :meth:`check` raises once they have passed or on abort."""

    __slots__ = ("_aborted", "_ends", "seconds", "what")

    def __init__(
        self, seconds: float, what: str, aborted: Callable[[], bool] = lambda: False
    ) -> None:
        self.seconds = seconds
        self.what = what
        self._ends = time.monotonic() + seconds
        self._aborted = aborted

    def check(self) -> None:
        """Raise :class:`ToolFailure` if the time is up or the run was aborted."""
        if self._aborted():
            raise ToolFailure(f"{self.what} was aborted")
        if time.monotonic() > self._ends:
            raise ToolFailure(
                f"{self.what} stopped: it did not finish within {self.seconds:g} s; "
                "narrow it (a smaller path, a glob, an offset and limit)"
            )
