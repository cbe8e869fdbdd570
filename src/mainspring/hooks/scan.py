"""The hot path: calling hook implementations in order while they have no opinion.

Most calls of most hooks answer "no opinion" (``None``): a transform that leaves the
context alone, a gate that allows, an observer. The kernel calls such a run of
implementations (or of event subscribers and observers) as :class:`Steps`: each step is a
function and the positions of the call's arguments it takes (or ``None``: it takes the
whole argument tuple). For each *shape* (the positions of every step) a scanner is
generated once per process: straight-line code calling each function with exactly its
arguments, stopping at the first step that answers, raises or returns an awaitable. The
caller then handles that step the slow way (awaiting, folding the answer in, classifying
the failure) and scans on from the next one.

The contract of every scan is ``(position, result, raised)``: ``position`` is where it
stopped (the end when every step was quiet), ``result`` what that step returned (not
``None`` nor the caller's second "no opinion" value ``quiet``; possibly an awaitable),
``raised`` what it raised, whatever it was (the caller classifies it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, final

__all__ = ["Shape", "Steps", "scan"]

Shape = tuple[tuple[int, ...] | None, ...]
"""For each step, the positions of the arguments its function takes (``None``: the whole
argument tuple, as one argument)."""

Scanner = Callable[
    [tuple[Callable[..., Any], ...], tuple[Any, ...], Any], tuple[int, Any, BaseException | None]
]

LONGEST = 64
"""Steps in one generated scanner at most; a longer run is scanned in parts."""

_KEEP = 1024
"""Generated scanners kept per process (past it, one is generated per use: a process
with this many distinct plugin shapes is unusual, and each one stays correct)."""

_scanners: dict[Shape, Scanner] = {}


@final
@dataclass(slots=True, eq=False)
class Steps:
    """Functions to call in order with one argument tuple (see the module).

    ``functions[i]`` is called with ``args[p] for p in shape[i]`` (or with ``args`` when
    ``shape[i]`` is ``None``); ``whole`` is the generated scanner of every step, ``parts``
    the scanners of the parts scanned so far, with their functions (the one field that
    changes: made on the first part).
    """

    functions: tuple[Callable[..., Any], ...]
    shape: Shape
    whole: Scanner
    parts: dict[tuple[int, int], tuple[Scanner, tuple[Callable[..., Any], ...]]] | None = field(
        default=None, repr=False
    )

    @classmethod
    def of(cls, steps: Sequence[tuple[Callable[..., Any], tuple[int, ...] | None]]) -> Steps:
        shape = tuple(positions for _, positions in steps)
        return cls(tuple(function for function, _ in steps), shape, scanner(shape))

    def __len__(self) -> int:
        return len(self.functions)


def scan(
    steps: Steps, args: tuple[Any, ...], start: int, end: int, quiet: Any = None
) -> tuple[int, Any, BaseException | None]:
    """Call ``steps[start:end]`` with ``args`` while each is quiet (see the module).

    Whole plans use the scanner generated with them; a part (a resumption after an
    answer, or the run between two implementations called elsewhere) uses its own, kept
    with the steps.
    """
    functions = steps.functions
    if start == 0 and end == len(functions):
        return steps.whole(functions, args, quiet)
    parts = steps.parts
    if parts is None:  # made on the first part (most steps are only scanned whole)
        parts = {}
        steps.parts = parts
    part = parts.get((start, end))
    if part is None:
        part = parts[start, end] = (scanner(steps.shape[start:end]), functions[start:end])
    position, result, raised = part[0](part[1], args, quiet)
    return start + position, result, raised


def scanner(shape: Shape) -> Scanner:
    """The generated scanner of ``shape`` (cached per process)."""
    known = _scanners.get(shape)
    if known is None:
        known = _generate(shape)
        if len(_scanners) < _KEEP:
            _scanners[shape] = known
    return known


def _generate(shape: Shape) -> Scanner:
    if len(shape) > LONGEST:
        return _in_parts(shape)
    if not shape:
        return _nothing
    count = len(shape)
    lines = [
        "def scan(functions, args, quiet):",
        f"    {''.join(f'f{i}, ' for i in range(count))}= functions",
    ]
    for position in sorted({p for taken in shape if taken is not None for p in taken}):
        lines.append(f"    a{position} = args[{position}]")
    lines += ["    position = 0", "    try:"]
    for index, taken in enumerate(shape):
        passed = "args" if taken is None else ", ".join(f"a{p}" for p in taken)
        if index:
            lines.append(f"        position = {index}")
        lines += [
            f"        result = f{index}({passed})",
            "        if result is not None and result is not quiet:",
            f"            return {index}, result, None",
        ]
    lines += [
        "    except BaseException as raised:  # the caller classifies it",
        "        return position, None, raised",
        f"    return {count}, None, None",
    ]
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<mainspring scan of {count}>", "exec"), namespace)
    generated: Scanner = namespace["scan"]
    return generated


def _nothing(
    functions: tuple[Callable[..., Any], ...], args: tuple[Any, ...], quiet: Any
) -> tuple[int, Any, BaseException | None]:
    """The scanner of no steps."""
    return 0, None, None


def _in_parts(shape: Shape) -> Scanner:
    """A scanner of a shape longer than :data:`LONGEST`: generated parts, one after
    another."""
    cuts = range(0, len(shape), LONGEST)
    parts = tuple((cut, scanner(shape[cut : cut + LONGEST])) for cut in cuts)

    def scan_parts(
        functions: tuple[Callable[..., Any], ...], args: tuple[Any, ...], quiet: Any
    ) -> tuple[int, Any, BaseException | None]:
        for cut, part in parts:
            position, result, raised = part(functions[cut : cut + LONGEST], args, quiet)
            if position < LONGEST and cut + position < len(shape):
                return cut + position, result, raised
        return len(shape), None, None

    return scan_parts
