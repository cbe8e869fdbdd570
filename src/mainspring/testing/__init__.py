"""The testing kit: a scripted provider, an event recorder and the event grammar checker.

- :class:`FauxProvider` and the :mod:`~mainspring.testing.faux` reply builders
  (``faux.text``, ``faux.thinking``, ``faux.tool_call``, ``faux.reply``, ``faux.error``,
  ``faux.raises``, ``faux.cut``) script model replies without a network.
- :class:`EventRecorder` is a subscriber that keeps every event.
- :func:`check_event_grammar` raises :class:`EventGrammarError` on the first violated
  rule of :data:`RULES` (the ordering guarantees of the event stream).
- :func:`scripted_run` prompts a fresh agent on a scripted model in one call.
- :func:`check_entry_point` is the smoke test of an installed plugin distribution.
- :func:`approve_all`, :func:`deny_all` and :func:`scripted_approver` answer the calls a
  gate asks about; :func:`what_the_model_saw` reads ``provider.requests`` as text.
- The pytest plugin (:mod:`mainspring.testing.pytest_plugin`, registered automatically)
  provides the ``agent``, ``faux_provider`` and ``recorder`` fixtures.

Plugin authors import these from ``mainspring.testing``; the module paths below it are
private.
"""

from . import faux
from .approvers import EXHAUSTED, ScriptedApprover, approve_all, deny_all, scripted_approver
from .entry_points import check_entry_point
from .faux import FauxProvider
from .grammar import RULES, EventGrammarError, check_event_grammar
from .model_view import ModelView, what_the_model_saw
from .recorder import EventRecorder
from .replay import ReplayProvider
from .scripted import ScriptedRun, scripted_run

__all__ = [
    "EXHAUSTED",
    "RULES",
    "EventGrammarError",
    "EventRecorder",
    "FauxProvider",
    "ModelView",
    "ReplayProvider",
    "ScriptedApprover",
    "ScriptedRun",
    "approve_all",
    "check_entry_point",
    "check_event_grammar",
    "deny_all",
    "faux",
    "scripted_approver",
    "scripted_run",
    "what_the_model_saw",
]
