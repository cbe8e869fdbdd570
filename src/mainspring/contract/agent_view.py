"""What a plugin's hooks see of the agent: the :class:`AgentView` protocol.

Where a hookspec says ``agent``, a plugin receives an object with this shape: what any
plugin may read of the agent, and the actions its granted capabilities allow (an action
outside the grant raises :class:`~mainspring.CapabilityError`; see
``docs/capabilities.md``). mainspring's own built-in plugins receive the
:class:`~mainspring.Agent` itself, which reads and acts the same way without the checks.
The contract is typed against this protocol, never against the concrete agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..providers.base import Model, Provider
    from ..settings import Settings
    from ..signal import AbortSignal
    from .plugin_info import PluginInfo
    from .state import AgentState

__all__ = ["AgentView", "Listener"]

Listener = Callable[[Any, "AbortSignal"], "Awaitable[None] | None"]
"""A subscriber: called with each event and the run's abort signal; may return an awaitable."""


@runtime_checkable
class AgentView(Protocol):
    """One plugin's view of one agent (see the module)."""

    @property
    def plugin(self) -> str:
        """The name of the plugin this view was given to."""

    @property
    def capabilities(self) -> frozenset[str]:
        """What this plugin may do: its granted capabilities (all, for an undeclared one)."""

    @property
    def settings(self) -> Settings:
        """The agent's settings (immutable)."""

    @property
    def state(self) -> AgentState:
        """A snapshot of the agent's state."""

    @property
    def session_id(self) -> str:
        """The conversation's id."""

    @property
    def is_running(self) -> bool:
        """Whether a run is in progress."""

    @property
    def last_message(self) -> Any:
        """The last message of the transcript, or ``None``."""

    @property
    def model(self) -> Model:
        """The model the next request goes to."""

    @property
    def tool_owners(self) -> Mapping[str, str]:
        """Each tool's name and the plugin that contributed it (read-only)."""

    @property
    def providers(self) -> Mapping[str, Provider]:
        """The registered providers by name (read-only)."""

    @property
    def plugins(self) -> tuple[PluginInfo, ...]:
        """The registered plugins, in load order, as immutable records."""

    @property
    def remembered_approvals(self) -> tuple[Any, ...]:
        """The approvals remembered in this session."""

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Subscribe ``listener`` to every event (needs ``observe``); returns the unsubscriber."""

    def steer(self, message: str | Any) -> None:
        """Queue a steering message (needs ``context``)."""

    def follow_up(self, message: str | Any) -> None:
        """Queue a follow-up message (needs ``context``)."""

    def approve(
        self,
        tool_call_id: str,
        allow: bool,
        *,
        remember: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Answer a call waiting for approval (needs ``approve``); see ``Agent.approve``."""

    def abort(self, reason: str = "aborted") -> None:
        """Abort the running run (any plugin may)."""

    def on_close(self, callback: Callable[[], Awaitable[None] | None]) -> None:
        """Call ``callback`` when the agent is closed (any plugin may)."""

    def register_plugin(self, plugin: object, name: str | None = None) -> str:
        """Register ``plugin`` in this agent (needs ``register``); returns its name."""

    def unregister_plugin(self, name: str) -> None:
        """Unregister plugin ``name`` (needs ``register``)."""
