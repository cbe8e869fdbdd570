"""Text from a server made safe for a terminal and a model: control characters escaped."""

from __future__ import annotations

import re

__all__ = ["escape_control"]

# C0 controls but tab and newline, DEL and C1, and the bidirectional overrides
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escape_control(text: str) -> str:
    """``text`` with control characters written as escapes (``ESC`` becomes ``\\x1b``)."""
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode(), text)
