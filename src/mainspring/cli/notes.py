"""Notes the command prints once per data directory, not on every run.

A note that is only news the first time (the model will not see the installed tools, say)
is printed when :func:`first_time` says so: the first call for a name in a data directory
(:func:`~mainspring.cli.sessions_cmd.data_dir`) leaves a marker file ``notes/NAME`` there.
When that directory cannot be written the note is printed every time rather than never.
"""

from __future__ import annotations

from .sessions_cmd import data_dir

__all__ = ["NOTE_UNSEEN_TOOLS", "first_time"]

NOTE_UNSEEN_TOOLS = "unseen-tools"
"""The note that the model does not see the installed tools."""


def first_time(name: str) -> bool:
    """Whether the note ``name`` was not yet shown for this data directory (it is now)."""
    marker = data_dir() / "notes" / name
    if marker.exists():
        return False
    try:
        marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
    return True
