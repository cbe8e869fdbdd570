"""The errors the kernel raises and plugins may raise (the decisions hooks return are in
:mod:`mainspring.contract.decisions`)."""

from __future__ import annotations

__all__ = [
    "AgentBusyError",
    "HookError",
    "HookTimeoutError",
    "PluginLoadError",
    "StopRun",
    "describe_error",
]


class AgentBusyError(RuntimeError):
    """A run is active: ``prompt()``, ``resume()`` and ``reset()`` must wait for idle."""

    def __init__(self, action: str) -> None:
        super().__init__(
            f"cannot {action}() while a run is active: use agent.steer() to redirect the "
            "current run, agent.follow_up() to queue the next request, or await "
            "agent.wait_for_idle() first"
        )


class PluginLoadError(RuntimeError):
    """A plugin could not be loaded or registered; the agent refuses to start.

    ``plugin`` is the plugin's name (the entry point name for installed plugins);
    ``distribution`` and ``version`` are set for installed plugins.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin: str | None = None,
        distribution: str | None = None,
        version: str | None = None,
    ) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.distribution = distribution
        self.version = version


class CapabilityError(PermissionError):
    """A plugin asked its :class:`~mainspring.AgentView` for an action its
    granted capabilities do not allow; ``capability`` is the one it needs."""

    def __init__(self, message: str, *, plugin: str, capability: str) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.capability = capability


class HookError(Exception):
    """Hook implementation ``plugin`` of ``hook`` raised (or broke an invariant).

    The original exception is ``__cause__``; the kernel decides what the failure means
    (see the failure column of the hook table).
    """

    def __init__(self, hook: str, plugin: str, cause: BaseException | str) -> None:
        self.hook = hook
        self.plugin = plugin
        self.cause_text = cause if isinstance(cause, str) else describe_error(cause)
        super().__init__(f"{hook} implementation of plugin {plugin!r} failed: {self.cause_text}")


class HookTimeoutError(TimeoutError):
    """A hook, listener or tool did not finish within its deadline (``timeout_s``)."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"timed out after {timeout_s:g} s")
        self.timeout_s = timeout_s


def describe_error(error: BaseException) -> str:
    """``Type: message`` (``Type`` alone when the message is empty); a timeout's own text."""
    if isinstance(error, HookTimeoutError):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class StopRun(Exception):
    """Raised by a run-time hook to end the run deliberately.

    The run ends with ``agent_end.reason="stopped_by_hook"`` and ``detail=reason``;
    queues are kept.
    """

    def __init__(self, reason: str = "stopped by a plugin") -> None:
        super().__init__(reason)
        self.reason = reason
