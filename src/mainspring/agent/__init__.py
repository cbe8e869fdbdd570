"""The agent facade: :class:`~mainspring.Agent`, put together from its plugins and run by
the kernel; the seams runners use (:class:`RunOptions`); the default model."""

from ..kernel.arguments import DEFAULT_MODEL
from ..kernel.options import RunOptions
from .agent import Agent

__all__ = ["DEFAULT_MODEL", "Agent", "RunOptions"]
