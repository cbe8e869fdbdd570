"""The abort signal, for the kernel's modules: it lives in :mod:`mainspring.signal`."""

from ..signal import AbortSignal, RunAborted

__all__ = ["AbortSignal", "RunAborted"]
