"""How the command reports a problem with what it was given: one line on stderr.

Bad usage and every configuration problem (an unknown model, a plugin that fails to load,
a missing API key, a session that does not exist) is ``mainspring: error: SENTENCE`` and
exit code 2 (:data:`EXIT_USAGE`); a warning is ``mainspring: warning: SENTENCE`` and the
command goes on.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["EXIT_USAGE", "usage_error", "warn"]

EXIT_USAGE = 2
"""Bad usage or configuration."""


def usage_error(problem: object, stream: TextIO | None = None) -> int:
    """Print ``problem`` as the command's error line; return :data:`EXIT_USAGE`."""
    print(f"mainspring: error: {problem}", file=stream or sys.stderr, flush=True)
    return EXIT_USAGE


def warn(problem: object, stream: TextIO | None = None) -> None:
    """Print ``problem`` as a warning line; the command goes on."""
    print(f"mainspring: warning: {problem}", file=stream or sys.stderr, flush=True)
