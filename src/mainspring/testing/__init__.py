"""The testing kit: a scripted provider, an event recorder and the event grammar checker.

- :class:`FauxProvider` and the :mod:`~mainspring.testing.faux` reply builders
  (``faux.text``, ``faux.thinking``, ``faux.tool_call``, ``faux.reply``, ``faux.error``,
  ``faux.raises``, ``faux.cut``) script model replies without a network.
- :class:`EventRecorder` is a subscriber that keeps every event.
- :func:`check_event_grammar` raises :class:`EventGrammarError` on the first violated
  rule of :data:`RULES` (the ordering guarantees of the event stream).

Plugin authors import these from ``mainspring.testing``; the module paths below it are
private.
"""

from . import faux
from .faux import FauxProvider
from .grammar import RULES, EventGrammarError, check_event_grammar
from .recorder import EventRecorder
from .replay import ReplayProvider
from .scripted import ScriptedRun, scripted_run

__all__ = [
    "RULES",
    "EventGrammarError",
    "EventRecorder",
    "FauxProvider",
    "ReplayProvider",
    "ScriptedRun",
    "check_event_grammar",
    "faux",
    "scripted_run",
]
