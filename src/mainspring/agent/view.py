"""What a plugin sees of the agent: :class:`ScopedView`, the :class:`~mainspring.AgentView`
scoped by the plugin's capabilities.

Hooks are handed a :class:`ScopedView` where their spec says ``agent``, never the
:class:`~mainspring.Agent` itself (mainspring's own built-in plugins excepted). A view
reads what any plugin may read (settings, state, the tools' owners, the providers, the
registered plugins as immutable records) and acts only as the plugin's *granted*
capabilities allow (see ``docs/capabilities.md``):

==========================  ==================================================================
``subscribe``               ``observe``: every event of every run
``steer``, ``follow_up``    ``context``: messages added to the conversation
``approve``                 ``approve``: answering a call that waits for approval
``register_plugin``         ``register``, granted by the operator in the config file (a
                            plugin's own manifest cannot give it); the plugin registered is
                            granted at most what the registering plugin holds
``unregister_plugin``       ``register`` as above; never a required plugin, an essential
                            built-in, or one holding ``gate``, ``redact`` or ``approve``
                            unless the operator lists it in ``[plugins] allow_unregister``
``abort``, ``on_close``     any plugin
==========================  ==================================================================

An action outside the grant raises :class:`~mainspring.CapabilityError` saying which
capability it needs. Each plugin has one view per agent, so ``id(agent)`` in a plugin is
stable across its hooks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, final

from ..contract.errors import CapabilityError
from ..loading.capabilities import CAPABILITIES, CAPABILITY_OF, PROTECTIVE
from ..loading.controls import normalise
from ..loading.loader import plugin_name

if TYPE_CHECKING:
    from ..contract.agent_view import Listener
    from ..contract.plugin_info import PluginInfo
    from ..contract.state import AgentState
    from ..providers.base import Model, Provider
    from ..settings import Settings
    from .agent import Agent

__all__ = ["ScopedView", "view_factory"]


@final
class ScopedView:
    """One plugin's view of one agent (see the module): an :class:`~mainspring.AgentView`."""

    __slots__ = ("__agent", "__plugin", "__weakref__")

    def __init__(self, agent: Agent, plugin: str) -> None:
        self.__agent = agent
        self.__plugin = plugin

    def __repr__(self) -> str:
        return f"<AgentView of plugin {self.__plugin!r}>"

    # -- reading ----------------------------------------------------------------------------

    @property
    def plugin(self) -> str:
        """The name of the plugin this view was given to."""
        return self.__plugin

    @property
    def capabilities(self) -> frozenset[str]:
        """What this plugin may do: its granted capabilities (all, for an undeclared one)."""
        info = self.__agent.plugins.info(self.__plugin)
        granted = info.granted if info is not None else frozenset()
        return CAPABILITIES if granted is None else granted

    @property
    def settings(self) -> Settings:
        """The agent's settings (immutable)."""
        return self.__agent.settings

    @property
    def state(self) -> AgentState:
        """A snapshot of the agent's state."""
        return self.__agent.state

    @property
    def session_id(self) -> str:
        """The conversation's id."""
        return self.__agent.session_id

    @property
    def is_running(self) -> bool:
        """Whether a run is in progress."""
        return self.__agent.is_running

    @property
    def last_message(self) -> Any:
        """The last message of the transcript, or ``None``."""
        return self.__agent.last_message

    @property
    def model(self) -> Model:
        """The model the next request goes to."""
        return self.__agent.state.model

    @property
    def tool_owners(self) -> Mapping[str, str]:
        """Each tool's name and the plugin that contributed it (a read-only copy)."""
        return MappingProxyType(dict(self.__agent.tool_owners))

    @property
    def providers(self) -> Mapping[str, Provider]:
        """The registered providers by name (read-only)."""
        return MappingProxyType(dict(self.__agent.providers))

    @property
    def plugins(self) -> tuple[PluginInfo, ...]:
        """The registered plugins, in load order, as immutable records."""
        return tuple(self.__agent.plugins.infos)

    @property
    def remembered_approvals(self) -> tuple[Any, ...]:
        """The approvals remembered in this session."""
        return self.__agent.remembered_approvals

    # -- acting -----------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Subscribe ``listener`` to every event (needs ``observe``); returns the unsubscriber."""
        self._need("observe", "subscribe to the agent's events")
        return self.__agent.subscribe(listener)

    def steer(self, message: str | Any) -> None:
        """Queue a steering message (needs ``context``)."""
        self._need("context", "add a steering message")
        self.__agent.steer(message)

    def follow_up(self, message: str | Any) -> None:
        """Queue a follow-up message (needs ``context``)."""
        self._need("context", "add a follow-up message")
        self.__agent.follow_up(message)

    def approve(
        self,
        tool_call_id: str,
        allow: bool,
        *,
        remember: str | None = None,
        reason: str | None = None,
        content: Mapping[str, Any] | None = None,
    ) -> None:
        """Answer a call waiting for approval (needs ``approve``); see ``Agent.approve``."""
        self._need("approve", "answer an approval")
        self.__agent.approve(tool_call_id, allow, remember=remember, reason=reason, content=content)

    def abort(self, reason: str = "aborted") -> None:
        """Abort the running run (any plugin may)."""
        self.__agent.abort(reason)

    def on_close(self, callback: Callable[[], Awaitable[None] | None]) -> None:
        """Call ``callback`` when the agent is closed (any plugin may)."""
        self.__agent.on_close(callback)

    def register_plugin(self, plugin: object, name: str | None = None) -> str:
        """Register ``plugin`` in this agent (needs ``register``, granted by the operator).

        The plugin registered is granted at most what this plugin holds (without
        ``register``), whatever it declares. Returns the name it was registered as.
        """
        self._need_register("register a plugin")
        held = self.capabilities - {"register"}
        plugins = self.__agent.plugins
        if name is None:
            taken = {info.name for info in plugins.infos}
            base = name = plugin_name(plugin)
            suffix = 2
            while name in taken:
                name, suffix = f"{base}-{suffix}", suffix + 1
        return plugins.register_narrowed(plugin, name, held)

    def unregister_plugin(self, name: str) -> None:
        """Unregister plugin ``name`` (needs ``register``, granted by the operator).

        Refused (:class:`~mainspring.CapabilityError`) for a plugin holding ``gate``,
        ``redact`` or ``approve`` unless the operator lists it in ``[plugins]
        allow_unregister``; a required plugin or an essential built-in is refused as for
        any caller (:class:`~mainspring.PluginLoadError`).
        """
        self._need_register(f"unregister plugin {name!r}")
        plugins = self.__agent.plugins
        info = plugins.info(name)
        if info is None:
            raise KeyError(f"no plugin is registered as {name!r}")
        granted = CAPABILITIES if info.granted is None else info.granted
        used = {CAPABILITY_OF[hook] for hook in info.hooks if hook in CAPABILITY_OF}
        protecting = sorted(used & granted & PROTECTIVE)
        allowed = {normalise(item) for item in plugins.policy.allow_unregister}
        if protecting and normalise(name) not in allowed:
            raise CapabilityError(
                f"plugin {self.__plugin!r} may not unregister {name!r}: it protects the user "
                f"({', '.join(protecting)}); the operator may allow it with [plugins] "
                f'allow_unregister = ["{name}"]',
                plugin=self.__plugin,
                capability="register",
            )
        plugins.unregister(name)

    # -- checks -----------------------------------------------------------------------------

    def _need(self, capability: str, action: str) -> None:
        if capability not in self.capabilities:
            raise CapabilityError(
                f"plugin {self.__plugin!r} may not {action}: that needs the capability "
                f"{capability!r}, and it holds only {_names(self.capabilities)}",
                plugin=self.__plugin,
                capability=capability,
            )

    def _need_register(self, action: str) -> None:
        grant = self.__agent.plugins.policy.grants.get(normalise(self.__plugin))
        if grant is None or "register" not in grant or "register" not in self.capabilities:
            raise CapabilityError(
                f"plugin {self.__plugin!r} may not {action}: that needs the capability "
                f"'register', which only the operator can grant ([plugins.{self.__plugin}] "
                'capabilities = [..., "register"] in the config file)',
                plugin=self.__plugin,
                capability="register",
            )


def _names(capabilities: frozenset[str]) -> str:
    return ", ".join(sorted(capabilities)) or "none"


def view_factory(agent: Agent) -> Callable[[str], ScopedView]:
    """One :class:`ScopedView` per plugin name of ``agent``, made on first use."""
    return _Views(agent)


@final
class _Views:
    """``agent``'s views by plugin name; nothing is held until the first is asked for
    (an agent with only built-ins never makes one)."""

    __slots__ = ("_agent", "_views")

    def __init__(self, agent: Agent) -> None:
        self._agent = agent
        self._views: dict[str, ScopedView] | None = None

    def __call__(self, plugin: str) -> ScopedView:
        views = self._views
        if views is None:
            views = self._views = {}
        view = views.get(plugin)
        if view is None:
            view = views[plugin] = ScopedView(self._agent, plugin)
        return view
