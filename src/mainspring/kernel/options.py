"""How one run enters the kernel: :class:`RunOptions`, for runners that replay a run.

A durable runner (``mainspring.durable``) executes a run again after a crash: the kernel
drives it from the start, the provider and the tools answer from their checkpoints, and
the run reaches the point where the process died with the same events in the same order.
Two options make that replay invisible to the agent's listeners:

- ``run_id``: the run keeps the id it had, so its events carry the same ``run_id``;
- ``delivered_through``: events up to this ``seq`` were delivered before the crash and
  are not delivered again, to subscribers or ``on_event`` observers; numbering goes on
  from there.

``provider`` puts a provider in front of the one the model resolves to (a wrapper that
checkpoints replies) for every request of this run, and ``recorder`` a listener in front
of every subscriber and observer (a journal that must hold each event before anyone
sees it). Nothing here changes what a run does, only what is seen of it and which
provider object answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from ..contract.agent_view import Listener
    from ..providers.base import Provider

__all__ = ["RunOptions"]


@final
@dataclass(frozen=True, slots=True)
class RunOptions:
    """Options of one run, passed as ``Agent.prompt(..., options=)``/``Agent.resume(options=)``.

    ``run_id`` (a non-empty string; default: a new id), ``delivered_through`` (the last
    ``seq`` already delivered, ``>= 0``; default 0: deliver everything), ``provider``
    (serves every request of this run, as ``Agent(provider=...)`` would; default: the
    provider of the run's model), ``recorder`` (a listener, called like a subscriber with
    each event of this run before every subscriber and ``on_event`` observer, those added
    during the run included; it skips what ``delivered_through`` skips, and its failure is
    a subscriber's). Malformed values raise ``TypeError``/``ValueError``.
    """

    run_id: str | None = None
    delivered_through: int = 0
    provider: Provider | None = None
    recorder: Listener | None = None

    def __post_init__(self) -> None:
        if self.run_id is not None and not (isinstance(self.run_id, str) and self.run_id):
            raise TypeError(f"RunOptions.run_id must be a non-empty str, not {self.run_id!r}")
        through = self.delivered_through
        if type(through) is not int:
            raise TypeError(f"RunOptions.delivered_through must be an int, not {through!r}")
        if through < 0:
            raise ValueError(f"RunOptions.delivered_through must be >= 0, got {through}")
        stream = getattr(self.provider, "stream", None)
        if self.provider is not None and not callable(stream):
            raise TypeError(f"RunOptions.provider must be a Provider, not {self.provider!r}")
        if self.recorder is not None and not callable(self.recorder):
            raise TypeError(f"RunOptions.recorder must be callable, not {self.recorder!r}")


DEFAULT_OPTIONS = RunOptions()
"""The options of a run started without any."""
